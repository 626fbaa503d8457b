"""Which stored runs a `learn --from-traces` run learns from, and which it replays in its gate.

Claims, commit keys, dropped batches and retries:
docs/internals/learning.md#learning-from-stored-runs.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from langgraph.store.base import BaseStore

from parallax.logic.run_stats import parse_since
from parallax.logic.trace_signal import (
    MODEL_CAUSES,
    learn_task,
    replay_task,
    served_by,
    signal_of,
    task_text,
)
from parallax.runtime.storage.stores import consumed_in, playbooks_in, traces_in
from parallax.state.records import TaskData
from parallax.state.trace_claims import BatchRuns, ReflectionFailure, TraceClaim
from parallax.state.trace_record import TraceRecord

LEASE_S = 1800.0


def _created(trace: TraceRecord) -> datetime:
    return datetime.fromisoformat(trace.get("created_at") or "1970-01-01T00:00:00+00:00")


async def claim_traces(
    store: BaseStore | None,
    tenant: str,
    playbook: str,
    round_id: str,
    since: str | None = None,
    limit: int | None = None,
    lease_s: float = LEASE_S,
    val_size: int = 50,
) -> tuple[list[TaskData], list[TaskData], TraceClaim]:
    """(learn tasks for the claimed runs, replay tasks for the gate, a summary of what was
    considered). A bad `since` raises BadFilter."""
    after = parse_since(since)
    traces = [
        t
        for t in await traces_in(store, tenant).traces()
        if served_by(t, playbook) and (after is None or _created(t) >= after)
    ]
    signals, no_signal, no_task = {}, 0, 0
    for trace in traces:
        if task_text(trace) is None:
            no_task += 1
        elif (signal := signal_of(trace)) is None:
            no_signal += 1
        else:
            signals[trace["trace_id"]] = (trace, signal)
    playbooks = playbooks_in(store, tenant)

    async def settle(key: str) -> bool:
        return await playbooks.settle(playbook, key)

    claim = await consumed_in(store, tenant, playbook).claim(
        list(signals), round_id, limit, lease_s, settle
    )
    tasks = [learn_task(*signals[t]) for t in claim.ids]
    replay = [
        replay_task(t) for t in reversed(traces) if t.get("target") is not None and task_text(t)
    ][:val_size]
    summary: TraceClaim = {
        "considered": len(traces),
        "no_signal": no_signal,
        "task_not_kept": no_task,
        "taken_before": claim.taken,
        "recovered": claim.recovered,
        "waiting": claim.waiting,
        "claimed": len(claim.ids),
        "by_signal": dict(Counter(t["signal"] for t in tasks)),
        "replayed_in_gate": len(replay),
        "consumed": 0,
        "to_retry": 0,
        "unlearnable": 0,
        "dropped": 0,
        "round": round_id,
    }
    return tasks, replay, summary


def reflection_failure(run: dict[str, Any]) -> ReflectionFailure:
    """{"cause", "error", "counts"} of a learn run whose reflection failed: the failed reflect
    branch's, else (the task crashed before it) the run's; `counts` when the reply came back and
    could not be used."""
    failed = next(
        (
            r
            for r in run.get("records", [])
            if r.get("kind") == "reflect" and r.get("status") != "ok"
        ),
        None,
    )
    source = failed if failed is not None else run
    cause = str(source.get("cause") or "crash")
    error = str(source.get("error") or "the reflection failed without saying why")
    return {"cause": cause, "error": error, "counts": cause in MODEL_CAUSES}


def reflected_on(runs: list[dict[str, Any]]) -> list[str]:
    """The trace ids of a batch's runs whose reflection came back: the ones it learns from."""
    return [str(r["task_id"]) for r in runs if r.get("task_id") and r.get("reflection") is not None]


async def mark_committing(
    store: BaseStore | None,
    tenant: str,
    playbook: str,
    round_id: str,
    runs: list[dict[str, Any]],
    key: str,
    lease_s: float,
) -> list[str]:
    """Name `key` on the claims of the runs a batch learns from, before its commit, and renew them.

    Returns the ids another round has claimed since; when there are any, nothing is written and the
    batch must not be committed (docs/internals/learning.md#learning-from-stored-runs)."""
    if ids := reflected_on(runs):
        return await consumed_in(store, tenant, playbook).committing(ids, round_id, key, lease_s)
    return []


async def consume_runs(
    store: BaseStore | None,
    tenant: str,
    playbook: str,
    round_id: str,
    runs: list[dict[str, Any]],
    dropped: bool = False,
) -> BatchRuns:
    """Mark the runs a batch reflected on consumed, and release the ones whose reflection failed.

    `dropped`: leave them, since the batch was not committed because another round took some of
    them. Returns {"consumed", "dropped", "to_retry", "unlearnable"}: how many of `runs` went each
    way."""
    consumed = consumed_in(store, tenant, playbook)
    done = reflected_on(runs)
    failed = {
        str(r["task_id"]): reflection_failure(r)
        for r in runs
        if r.get("task_id") and r.get("reflection") is None
    }
    learned = await consumed.consume(done, round_id) if done and not dropped else 0
    given_up = await consumed.release(failed, round_id) if failed else []
    return {
        "consumed": learned,
        "dropped": len(done) if dropped else 0,
        "to_retry": len(failed) - len(given_up),
        "unlearnable": len(given_up),
    }
