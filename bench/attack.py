"""An attacker with one tenant's key against one `parallax serve` replica: the attack table, memory
and /ok (JSON).

It starts a throwaway deployment as docs/deploy.md does (PostgreSQL, Redis, two tenants, the
scripted model of testkit/fault_server.py; one replica, so its memory is the attack's alone), lets
it settle, then sends every attempt of testkit/attacks.py while two threads watch the replica: one
samples its RSS every 50 ms, one asks `GET /ok` every 100 ms. It prints the table and:
- `held`: attempts answered 4xx (or handled within bounds) with nothing run or written;
- `commands_executed`, `cross_tenant_writes`: side effects seen (goal 0);
- `memory_mb`: idle (median RSS over 2 s before the attack), peak, and peak over idle (goal <= 50);
- `ok_ms`: /ok latency through the attack, p50 / p99 / max and how many polls got no answer
  (goal p99 <= 250).

    python -m bench.attack --json

Needs the server venv (Python 3.12, `pip install -e '.[server,test]'`), PostgreSQL and Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from testkit import attacks
from testkit.aegra_cluster import Cluster, Replica, missing_services
from testkit.fault_server import FaultConfig, FaultServer


class Watch:
    """Samples the replica's RSS (50 ms) and times GET /ok (100 ms) on threads of their own until
    stopped."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.rss: list[int] = []
        self.ok_ms: list[float] = []
        self.unanswered = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._sample, daemon=True),
            threading.Thread(target=self._poll, daemon=True),
        ]

    def _sample(self) -> None:
        import psutil

        process = psutil.Process(self.replica.pid)
        while not self._stop.wait(0.05):
            try:
                self.rss.append(process.memory_info().rss)
            except psutil.Error:
                return

    def _poll(self) -> None:
        import httpx

        with httpx.Client(base_url=self.replica.url, timeout=5) as http:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    http.get("/ok").raise_for_status()
                    self.ok_ms.append((time.perf_counter() - started) * 1000)
                except httpx.HTTPError:
                    self.unanswered += 1
                    self.ok_ms.append(5000.0)
                self._stop.wait(max(0.0, 0.1 - (time.perf_counter() - started)))

    def start(self) -> Watch:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


async def main() -> dict[str, Any]:
    if missing := missing_services():
        raise SystemExit("bench.attack needs: " + "; ".join(missing))
    server = FaultServer(FaultConfig(latency_ms=20, reply=attacks.reply))
    keys = ",".join(f"{key}:{tenant}" for tenant, key in attacks.KEYS.items())
    env = {
        "OPENAI_BASE_URL": server.start(),
        "PARALLAX_RESPONSE_FORMAT": "json_schema",
        "PARALLAX_MODEL": "fault-model",
        "PARALLAX_API_KEYS": keys,
        "PARALLAX_STRAGGLER_FACTOR": "0",
        "PARALLAX_MAX_PENDING": "8",
        "PARALLAX_WEBHOOK_SECRETS": (
            f"{attacks.TENANT}:a-webhook-secret-of-acme,"
            f"{attacks.OTHER_TENANT}:a-webhook-secret-of-beta"
        ),
    }
    try:
        with tempfile.TemporaryDirectory(prefix="bench-attack-") as tmp:
            cluster = Cluster(Path(tmp), env).create()
            try:
                replica = cluster.start_replica()
                ground = attacks.Ground(replica.url, cluster.database_url, Path(tmp))
                await attacks.prepare(ground)
                await asyncio.sleep(2)
                idle_watch = Watch(replica).start()
                await asyncio.sleep(2)
                idle_watch.stop()
                idle = statistics.median(idle_watch.rss)
                watch = Watch(replica).start()
                started = time.monotonic()
                rows = await attacks.run_attacks(ground)
                took = time.monotonic() - started
                watch.stop()
            finally:
                cluster.close()
    finally:
        server.stop()
    peak = max(watch.rss or [idle])
    return {
        "attempts": len(rows),
        "held": sum(r.held for r in rows),
        "not_held": [
            f"{r.n}. {r.attack}: {r.status} {r.side_effect or r.got}" for r in rows if not r.held
        ],
        "status_5xx": sum(1 for r in rows if (r.status or 0) >= 500),
        "commands_executed": sum("command ran" in r.side_effect for r in rows),
        "cross_tenant_writes": sum(
            f"under {attacks.OTHER_TENANT!r}" in r.side_effect for r in rows
        ),
        "memory_mb": {
            "idle": round(idle / 2**20, 1),
            "peak": round(peak / 2**20, 1),
            "peak_over_idle": round((peak - idle) / 2**20, 1),
            "goal_over_idle": 50,
        },
        "ok_ms": {
            "polls": len(watch.ok_ms),
            "p50": round(percentile(watch.ok_ms, 0.5), 1),
            "p99": round(percentile(watch.ok_ms, 0.99), 1),
            "max": round(max(watch.ok_ms or [0.0]), 1),
            "unanswered": watch.unanswered,
            "goal_p99": 250,
        },
        "attack_s": round(took, 1),
        "rows": [asdict(r) for r in rows],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the whole result as JSON (the default prints the table)",
    )
    args = parser.parse_args()
    result = asyncio.run(main())
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for row in result["rows"]:
            print(
                f"{row['n']:>3} {'held' if row['held'] else 'FAIL'} {row['status']!s:>4}"
                f" {row['face']:<10} {row['attack']}  {row['side_effect']}"
            )
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
