"""Faults on a running deployment (testkit/fault_lab.py) and what they cost: the deploy fault test
and `bench.faults` run these.

One scenario: start `runs` solve runs (votes asked one after another, so each run spans seconds) and
one learn run (it commits a playbook version), each on its own thread with its own task text; once
the first run has answers in flight, inject the fault; heal it; wait until every run is finished in
the database; then count, from the database and the scripted model's log:

- lost: runs that did not end `success` (or never ended);
- finished_twice: runs that two executions ran to the end (the trace is a run's last write: two
  traces for its thread, or its trace written by two lease generations, `parallax_handovers`); a
  write the database refused as stale (`parallax_fenced_writes`) is counted apart
  (`stale_ends_refused`);
- traces_written_twice / playbook_versions_twice: the same, for every trace and for playbook
  versions (two versions of one learn batch);
- duplicate_model_calls: answered model calls beyond the first for the same request (the same
  messages at the same temperature: one vote of one run), i.e. work done twice;
- takeovers: runs claimed more than once (their lease generation, server/lease_fence.py, above 1);
- recover_s: seconds from the end of the fault (heal, restart, kill) until the last run finished.

The faults: `partition` (the replica running the first run loses its database link until another
replica has taken its runs over, then gets it back), `db_restart` (PostgreSQL stopped mid-run and
started again after `outage_s`), `redis_outage` (Redis stopped for `outage_s`, then started empty:
its queue is gone), `replica_kill` (SIGKILL of the replica running the first run; it is started
again).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testkit.fault_lab import FaultLab, LabReplica
from testkit.fault_server import default_reply

FAULTS = ("partition", "db_restart", "redis_outage", "replica_kill")
KEY, TENANT = "key-acme", "acme"
LESSON = "Current ratio = current assets / current liabilities; round to 2 decimals."
LAB_ENV = {
    "PARALLAX_API_KEYS": f"{KEY}:{TENANT}",
    "PARALLAX_RESPONSE_FORMAT": "json_schema",
    "PARALLAX_MODEL": "fault-model",
    "PARALLAX_MAX_TOKENS": "128",
    "PARALLAX_STRAGGLER_FACTOR": "0",
    "STUCK_PENDING_THRESHOLD_SECONDS": "4",
    "POSTGRES_POLL_INTERVAL_SECONDS": "1",
    "BG_JOB_MAX_RETRIES": "10",
}
"""Every lab replica's settings: one tenant, the scripted model, short leases (FAST_LEASES), and a
stuck-pending reaper and Postgres poll that notice a lost Redis queue within seconds (Aegra's
defaults: 120 s and 5 s)."""


def reply(body: dict[str, Any]) -> str:
    """The scripted model: a lesson for the reflector and an entry for the curator, else the
    schema's instance."""
    text = "\n".join(str(m.get("content")) for m in body["messages"])
    if "You review one solved task" in text:
        return json.dumps(
            {"diagnosis": "used the wrong formula", "lessons": [LESSON], "item_tags": []}
        )
    if "You turn lessons into playbook entries" in text:
        return json.dumps(
            {"entries": [{"section": "ratios", "text": LESSON, "about": ["current"]}]}
        )
    return default_reply(body)


def client(replica: LabReplica) -> Any:
    from langgraph_sdk import get_client

    return get_client(url=replica.url, api_key=KEY, timeout=30)


async def start_runs(
    replica: LabReplica, fault: str, runs: int, votes: int
) -> list[dict[str, str]]:
    """`runs` solve runs and one learn run (on playbook `pb-<fault>`), each on a new thread; their
    ids. `fault` names this scenario (tasks and the playbook carry it): give each scenario its own.
    """
    c = client(replica)
    started = []
    for n in range(runs):
        thread = await c.threads.create()
        run = await c.runs.create(
            thread["thread_id"],
            "solve",
            input={"task": f"[{fault} {n}] What is 6 * 7?", "mode": "vote", "votes": votes},
            context={"max_concurrency": 1, "max_attempts": 2, "early_stop": False},
        )
        started.append(
            {"thread_id": thread["thread_id"], "run_id": run["run_id"], "graph": "solve"}
        )
    thread = await c.threads.create()
    run = await c.runs.create(
        thread["thread_id"],
        "learn",
        input={
            "tasks": [
                {
                    "id": "t1",
                    "input": (
                        f"[{fault}] Current assets 5 and current liabilities 2: what is the current"
                        " ratio?"
                    ),
                    "target": "2.5",
                }
            ],
            "batch": 1,
            "mode": "direct",
            "playbook": f"pb-{fault}",
        },
    )
    started.append({"thread_id": thread["thread_id"], "run_id": run["run_id"], "graph": "learn"})
    return started


def _poll(what: str, check: Any, timeout_s: float, interval_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = check()
        except Exception:  # noqa: BLE001 - the database may be down on purpose: try again
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(interval_s)


def wait_finished(lab: FaultLab, run_ids: list[str], timeout_s: float) -> float:
    """Block until every run is terminal in the database; the monotonic time it happened."""

    def done() -> bool:
        rows = lab.query(
            "SELECT count(*) FROM runs WHERE run_id = ANY(%s) AND status IN ('success', 'error',"
            " 'interrupted')",
            run_ids,
        )
        return rows[0][0] == len(run_ids)

    _poll(f"{len(run_ids)} runs to finish", done, timeout_s, 0.2)
    return time.monotonic()


def inject(
    lab: FaultLab, fault: str, victim: LabReplica, outage_s: float, run_ids: list[str]
) -> tuple[float, float]:
    """Cause `fault` and end it; (seconds it lasted, monotonic time it ended)."""
    started = time.monotonic()
    if fault == "partition":
        lab.partition(victim)

        def taken_over() -> (
            bool
        ):  # the victim holds none of the runs any more: another replica's reaper took them
            rows = lab.query(
                "SELECT claimed_by FROM runs WHERE run_id = ANY(%s) AND status = 'running'", run_ids
            )
            return not any(f"-{victim.pid}-worker-" in str(c) for (c,) in rows)

        try:
            _poll("another replica to take the victim's runs over", taken_over, 60, 0.2)
        finally:
            lab.heal(victim)
    elif fault == "db_restart":
        lab.stop_postgres()
        time.sleep(outage_s)  # the outage itself: how long the database is away is the fault's size
        lab.start_postgres()
    elif fault == "redis_outage":
        lab.stop_redis()
        time.sleep(outage_s)
        lab.start_redis()
    elif fault == "replica_kill":
        victim.kill()
    else:
        raise ValueError(f"unknown fault {fault!r}: one of {', '.join(FAULTS)}")
    ended = time.monotonic()
    return ended - started, ended


def tally(lab: FaultLab, started: list[dict[str, str]], name: str) -> dict[str, Any]:
    """What the fault cost (see the module docstring), from the database and the model's log."""
    run_ids = [r["run_id"] for r in started]
    status = dict(
        lab.query("SELECT run_id::text, status FROM runs WHERE run_id = ANY(%s)", run_ids)
    )
    lost = [r for r in run_ids if status.get(r) != "success"]
    traces = lab.query(
        "SELECT key, value->>'thread_id', updated_at > created_at FROM store WHERE prefix = %s",
        f"traces.{TENANT}",
    )
    threads = {r["thread_id"]: r["run_id"] for r in started}
    per_thread = Counter(t for _, t, _ in traces if t in threads)
    rewritten = sorted(threads[t] for _, t, again in traces if again and t in threads)
    refused = lab.query(
        "SELECT run_id, prefix FROM parallax_fenced_writes WHERE run_id = ANY(%s)", run_ids
    )
    stale_ends = sorted({r for r, prefix in refused if prefix == f"traces.{TENANT}"})
    handed = {
        r
        for (r,) in lab.query(
            "SELECT run_id FROM parallax_handovers WHERE run_id = ANY(%s) AND prefix = %s",
            [str(r) for r in run_ids],
            f"traces.{TENANT}",
        )
    }
    versions = lab.query(
        "SELECT key, value->'gate'->>'commit_key' FROM store WHERE prefix = %s AND key LIKE 'v0%%'",
        f"playbooks.{TENANT}.pb-{name}",
    )
    keys = Counter(k for _, k in versions)
    generations = dict(
        lab.query(
            "SELECT run_id, generation FROM parallax_run_leases WHERE run_id = ANY(%s)",
            [str(r) for r in run_ids],
        )
    )
    calls = Counter(
        (e["messages_hash"], e["temperature"])
        for e in lab.model.log()
        if e.get("messages_hash") and e.get("status") == 200
    )
    started_calls = Counter(
        (e["messages_hash"], e["temperature"]) for e in lab.model.log() if e.get("messages_hash")
    )
    return {
        "runs": len(run_ids),
        "lost": len(lost),
        # a run ended twice: two traces for its thread (each execution wrote its own), or its trace
        # written by two executions (one reached the end, lost its lease, and the next reached the
        # end again); a trace written again by the same execution (a retried write) is one end
        # (`trace_rewrites`)
        "finished_twice": len({threads[t] for t, n in per_thread.items() if n > 1} | handed),
        "traces_twice": sum(n - 1 for n in per_thread.values() if n > 1),
        "trace_rewrites": len(rewritten),
        "stale_writes_refused": len(refused),
        "stale_ends_refused": len(stale_ends),
        "playbook_versions": len(versions),
        "playbook_versions_twice": sum(n - 1 for n in keys.values() if n > 1),
        "duplicate_model_calls": sum(n - 1 for n in calls.values() if n > 1),
        "repeated_model_requests": sum(n - 1 for n in started_calls.values() if n > 1),
        "model_calls": sum(calls.values()),
        "takeovers": sum(1 for g in generations.values() if g > 1),
        "statuses": dict(Counter(status.get(r, "missing") for r in run_ids)),
        "lost_runs": lost,
    }


def calls_after_lease_lost(
    lab: FaultLab, victim: LabReplica, run_ids: list[str], until: float
) -> int:
    """Model calls the victim started after the last of its runs was claimed by another replica
    (when its last lease was gone) and before `until` (the heal): with fencing, none."""
    rows = lab.query(
        "SELECT max(EXTRACT(EPOCH FROM claimed_at)) FROM parallax_run_leases WHERE run_id = ANY(%s)"
        " AND generation > 1 AND claimed_by NOT LIKE %s",
        [str(r) for r in run_ids],
        f"%-{victim.pid}-worker-%",
    )
    lost_at = rows[0][0]
    if lost_at is None:
        return 0
    return sum(
        1
        for e in lab.model.log()
        if e.get("messages_hash")
        and e.get("client") == victim.host
        and float(lost_at) < e["time"] < until
    )


def scenario(
    lab: FaultLab,
    fault: str,
    runs: int = 3,
    votes: int = 4,
    outage_s: float = 4.0,
    timeout_s: float = 150.0,
) -> dict[str, Any]:
    """Run one fault on the lab's live replicas and return its tally, with the fault's timings."""
    lab.model.reset()
    lab.model.config = lab.model.config.model_copy(update={"latency_ms": 600})
    try:
        entry = lab.live()[0]
        name = f"{fault}-{uuid.uuid4().hex[:6]}"
        started = asyncio.run(start_runs(entry, name, runs, votes))
        run_ids = [r["run_id"] for r in started]
        first = run_ids[0]
        victim = _poll(
            "the first run to be claimed", lambda: lab.executing_replica(first), 60, 0.05
        )
        _poll(
            "the first run's first answers",
            lambda: (
                sum(1 for e in lab.model.log() if e.get("status") == 200 and e.get("messages_hash"))
                >= 2
            ),
            60,
            0.05,
        )
        lasted, ended = inject(lab, fault, victim, outage_s, run_ids)
        healed_wall = time.time()
        finished = wait_finished(lab, run_ids, timeout_s)
        out = {
            "fault": fault,
            **tally(lab, started, name),
            "fault_s": round(lasted, 2),
            "recover_s": round(finished - ended, 2),
            "victim": victim.index,
        }
        if fault == "partition":
            out["calls_after_lease_lost"] = calls_after_lease_lost(
                lab, victim, run_ids, healed_wall
            )
    finally:
        lab.model.config = lab.model.config.model_copy(update={"latency_ms": 20})
    if fault == "replica_kill":  # back to full strength for whatever runs next
        lab.start_replica(victim.index)
    return out


@contextmanager
def running_lab(work: Path, replicas: int = 2) -> Iterator[FaultLab]:
    """The lab with the scripted model (`reply`) and `replicas` replicas up; everything removed
    after."""
    from testkit.fault_server import FaultConfig, FaultServer

    with FaultLab(work, replicas_wanted=replicas, env=dict(LAB_ENV)) as lab:
        lab.model = FaultServer(FaultConfig(latency_ms=20, reply=reply), lab_host=lab.model_host)
        lab.env["OPENAI_BASE_URL"] = lab.model.start()
        try:
            for i in range(replicas):
                lab.start_replica(i)
            yield lab
        finally:
            lab.model.stop()
