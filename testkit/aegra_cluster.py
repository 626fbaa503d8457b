"""Replicas of the deployed graph API for tests and benchmarks: a throwaway database, `parallax
serve` x N.

Why this exists: the deploy tests and `bench.serve` need what an operator runs (docs/deploy.md,
Deploy): a fresh PostgreSQL database, Redis, and replicas started one after the other with
`parallax serve`, each answering /ready before the next starts. Everything here is loopback
and private to one `Cluster`: its own database (created, then dropped with FORCE), its own
Redis queue key and channel prefix (deleted at the end), its own PARALLAX_HOME per replica.
Replicas are stopped by PID (a replica is one process: `parallax serve` runs uvicorn in
process), SIGTERM then SIGKILL, and `kill()` sends SIGKILL at once to simulate a crash.

Short lease settings (6 s lease, 2 s heartbeat and reaper) make a killed replica's runs
taken over within ~10 s instead of Aegra's default ~35 s.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parallax.runtime.model_server import wait_for_200

ROOT = Path(__file__).resolve().parents[1]
PARALLAX = Path(sys.executable).with_name("parallax")
PG_ADMIN = os.environ.get("PARALLAX_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("PARALLAX_TEST_REDIS", "redis://127.0.0.1:6379/0")
METRICS_KEY = "test-metrics-key-0123456789"
"""PARALLAX_METRICS_KEY of every test deployment: what the operator's scraper sends to see every
series."""
FAST_LEASES = {
    "LEASE_DURATION_SECONDS": "6",
    "HEARTBEAT_INTERVAL_SECONDS": "2",
    "REAPER_INTERVAL_SECONDS": "2",
}


class ClusterError(RuntimeError):
    """A replica or a service it needs did not come up; the message says which and shows its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_with(
    work: Path, graphs: dict[str, str], scopes: dict[str, list[str]] | None = None
) -> Path:
    """Parallax's aegra.json with `graphs` (name -> "path/to/file.py:attr") served beside its own,
    every path absolute, written to `work`/aegra.json (outside the repository): for
    `Cluster(config=...)`. A name Parallax already serves keeps Parallax's graph; `scopes` adds
    store scopes beside Parallax's (which win). Auth and the HTTP app stay Parallax's."""
    import json

    packaged = ROOT / "parallax" / "server" / "aegra.json"  # its graph paths are relative to itself
    ours = json.loads(packaged.read_text())
    served = {}
    for name, spec in {**graphs, **ours["graphs"]}.items():
        path, _, attr = spec.partition(":")
        resolved = (
            (packaged.parent / path).resolve() if name in ours["graphs"] else Path(path).resolve()
        )
        served[name] = f"{resolved}:{attr}"
    work.mkdir(parents=True, exist_ok=True)
    target = work / "aegra.json"
    store = {
        **ours.get("store", {}),
        "scopes": {**(scopes or {}), **ours.get("store", {}).get("scopes", {})},
    }
    target.write_text(
        json.dumps(
            {**ours, "dependencies": [str(ROOT)], "graphs": served, "store": store}, indent=2
        )
    )
    return target


def missing_services() -> list[str]:
    """What the deploy tests need and this machine lacks (empty when all is there)."""
    missing = []
    try:
        import aegra_api  # noqa: F401
    except ImportError:
        missing.append("Aegra (pip install -e '.[server]' in a Python 3.12 venv)")
    if not PARALLAX.is_file():
        missing.append(f"the parallax command next to {sys.executable}")
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN, connect_timeout=3):
            pass
    except Exception as exc:  # noqa: BLE001 - any failure means "no PostgreSQL"
        missing.append(f"PostgreSQL at {PG_ADMIN.split('@')[-1]} ({type(exc).__name__})")
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001
        missing.append(f"Redis at {REDIS_URL} ({type(exc).__name__})")
    return missing


def require_services() -> None:
    """Skip a deploy test module outside the server venv, fail it when the venv is there but a
    service is not (and in CI, where tests/conftest.py fails every skip)."""
    import pytest

    if missing := missing_services():
        try:
            import aegra_api  # noqa: F401
        except ImportError:
            pytest.skip(
                "needs the server venv (Python 3.12, pip install -e '.[server,test]'): "
                + "; ".join(missing)
            )
        pytest.fail("the deploy tests need these and they are missing: " + "; ".join(missing))


@dataclass
class Replica:
    port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the replica dies mid-whatever, as in a crash."""
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM (Aegra drains and re-queues what it was running), SIGKILL after `timeout_s`."""
        if not self.alive():
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        except ProcessLookupError:
            pass


@dataclass
class Cluster:
    """A database, a Redis queue and the replicas serving them; `env` is added to every replica's
    environment."""

    work: Path
    env: dict[str, str] = field(default_factory=dict)
    name: str = field(default_factory=lambda: f"parallax_test_{uuid.uuid4().hex[:10]}")
    replicas: list[Replica] = field(default_factory=list)
    model: Any = None
    """The model server its replicas talk to, when the caller wants it at hand (a FaultServer in
    tests)."""
    config: Path | None = None
    """An Aegra config other than the repository's aegra.json (`parallax serve --config`)."""

    @property
    def database_url(self) -> str:
        return PG_ADMIN.rsplit("/", 1)[0] + f"/{self.name}"

    def create(self) -> Cluster:
        import psycopg

        if missing := missing_services():
            raise ClusterError("missing: " + "; ".join(missing))
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.work.mkdir(parents=True, exist_ok=True)
        return self

    def replica_env(self, port: int) -> dict[str, str]:
        env = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": REDIS_URL,
            "REDIS_CHANNEL_PREFIX": f"{self.name}:run:",
            "WORKER_QUEUE_KEY": f"{self.name}:jobs",
            "PARALLAX_HOME": str(self.work / f"home-{port}"),
            "LOG_LEVEL": "warning",
            "CRON_ENABLED": "false",
            "LANGSMITH_TRACING": "false",
            "PARALLAX_METRICS_KEY": METRICS_KEY,
            **FAST_LEASES,
            **self.env,
        }
        for name in (
            "PARALLAX_DATABASE_URL",
            "PARALLAX_GGUF",
            "PARALLAX_VOTE_MODELS",
            "PARALLAX_JUDGE_MODEL",
            "AEGRA_CONFIG",
            "HOST",
            "PORT",
        ):
            env.pop(name, None)
        return env

    def live(self) -> tuple[Replica, Replica]:
        """Two replicas that are running (a test may have killed others)."""
        a, b = [r for r in self.replicas if r.alive()][:2]
        return a, b

    def cli(self, *args: str) -> dict[str, Any]:
        """`parallax ARGS --json` on this deployment's database (PARALLAX_DATABASE_URL), as an
        operator runs it."""
        import json

        env = {
            **os.environ,
            **self.env,
            "PARALLAX_DATABASE_URL": self.database_url,
            "PARALLAX_HOME": str(self.work / "cli-home"),
        }
        done = subprocess.run(
            [str(PARALLAX), *args, "--json"], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def set_model(self, **fields: Any) -> None:
        """Change the scripted model's FaultConfig (latency, faults) while the replicas run."""
        self.model.config = self.model.config.model_copy(update=fields)

    def start_replica(self, port: int | None = None, timeout_s: float = 90.0) -> Replica:
        """Start one replica and return once its /ready answers 200."""
        return self.wait_ready(self.launch(port), timeout_s)

    def launch(self, port: int | None = None) -> Replica:
        """Start one replica without waiting for it."""
        port = port or free_port()
        log_path = self.work / f"replica-{port}.log"
        with open(log_path, "ab") as log:
            config = ["--config", str(self.config)] if self.config else []
            process = subprocess.Popen(
                [str(PARALLAX), "serve", "--host", "127.0.0.1", "--port", str(port), *config],
                cwd=ROOT,
                env=self.replica_env(port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        replica = Replica(port, process, log_path)
        self.replicas.append(replica)
        return replica

    def wait_ready(self, replica: Replica, timeout_s: float = 90.0) -> Replica:
        outcome = wait_for_200(f"{replica.url}/ready", timeout_s, alive=replica.alive)
        if outcome == "died":
            raise ClusterError(
                f"replica on {replica.port} exited with"
                f" {replica.process.returncode}:\n{replica.log()[-4000:]}"
            )
        if outcome == "timeout":
            replica.kill()
            raise ClusterError(
                f"replica on {replica.port} not ready after"
                f" {timeout_s:.0f}s:\n{replica.log()[-4000:]}"
            )
        return replica

    def executing_replica(self, run_id: str) -> Replica | None:
        """The replica whose worker holds `run_id` now (Aegra's runs.claimed_by is
        vm-<pid>-worker-<n>)."""
        import psycopg

        with psycopg.connect(self.database_url) as conn:
            row = conn.execute(
                "SELECT claimed_by FROM runs WHERE run_id = %s", (run_id,)
            ).fetchone()
        claimed = (row or [None])[0] or ""
        parts = claimed.split("-")
        pid = int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else None
        return next((r for r in self.replicas if r.pid == pid and r.alive()), None)

    def peak_rss(self) -> dict[int, int]:
        """Current RSS per live replica, bytes (callers sample it to keep a peak)."""
        import psutil

        out = {}
        for replica in self.replicas:
            try:
                out[replica.port] = psutil.Process(replica.pid).memory_info().rss
            except psutil.Error:
                pass
        return out

    def close(self) -> None:
        import psycopg
        import redis

        for replica in self.replicas:
            replica.stop()
        try:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            client = redis.Redis.from_url(REDIS_URL)
            for key in client.scan_iter(match=f"{self.name}:*"):
                client.delete(key)


def readme_retry_helper():
    """`retry_on_429` from the client snippet of docs/deploy.md (Clients), run as written."""
    import re

    readme = (ROOT / "docs" / "deploy.md").read_text()
    block = next(
        b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "def retry_on_429" in b
    )
    namespace: dict = {}
    exec(compile(block, "docs/deploy.md", "exec"), namespace)  # noqa: S102 - our own docs
    return namespace["retry_on_429"]


@contextmanager
def two_replicas(
    work: Path,
    reply: Any,
    keys: dict[str, str],
    max_pending: int,
    extra_env: dict[str, str] | None = None,
    config: Path | None = None,
) -> Iterator[Cluster]:
    """A database, two replicas (the second started once the first answered /ready) and the scripted
    model (testkit/fault_server.py answering with `reply`), for a deploy test module; removed after.
    `config`: an Aegra config other than the repository's (`config_with`). Without the server venv's
    services this skips outside CI and fails in it (tests/conftest.py)."""
    from testkit.fault_server import FaultConfig, FaultServer

    require_services()
    server = FaultServer(FaultConfig(latency_ms=20, reply=reply))
    url = server.start()
    env = {
        "OPENAI_BASE_URL": url,
        "PARALLAX_RESPONSE_FORMAT": "json_schema",
        "PARALLAX_MODEL": "fault-model",
        "PARALLAX_API_KEYS": ",".join(f"{k}:{t}" for t, k in keys.items()),
        "PARALLAX_MAX_PENDING": str(max_pending),
        "PARALLAX_RETRY_AFTER_S": "1",
        "PARALLAX_STRAGGLER_FACTOR": "0",
        **(extra_env or {}),
    }
    cluster = Cluster(work, env, config=config).create()
    cluster.model = server
    try:
        cluster.start_replica()
        cluster.start_replica()
        yield cluster
    finally:
        cluster.close()
        server.stop()


async def fill_pending(client: Any, runs: int) -> list[tuple[str, str]]:
    """Start `runs` direct runs of the client's tenant, each on a new thread (to meet its
    pending-runs limit); (thread id, run id) of each, for joining them afterwards."""
    started = []
    for _ in range(runs):
        thread = await client.threads.create()
        run = await client.runs.create(
            thread["thread_id"], "solve", input={"task": "What is 1 + 1?", "mode": "direct"}
        )
        started.append((thread["thread_id"], run["run_id"]))
    return started


def sql(cluster: Any, query: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of `query` on the cluster's database (none for a statement that returns none). psycopg
    is imported here: it is the server venv's, and the main venv collects the deploy test modules
    without it."""
    import psycopg

    with psycopg.connect(cluster.database_url, autocommit=True) as conn:
        cursor = conn.execute(query, args)
        return cursor.fetchall() if cursor.description else []
