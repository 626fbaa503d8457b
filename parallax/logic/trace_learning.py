"""Which stored runs a `learn --from-traces` run learns from, and which it replays in its gate.

The runs: the tenant's traces served by the playbook (production runs, either arm of a gray
release; never the learn graph's own runs or evaluations), within `since`, whose task was kept
whole and that carry a signal (logic/trace_signal.py), and that no round has taken for this
playbook yet. They are claimed oldest first, up to `limit`, under the store's lock
(runtime/storage/consumed.py), so two learning rounds at once never take the same run.

The gate's validation tasks: the playbook's runs that carry a target (a person's correction,
or a target given with the run), newest first, replayed with the head and with the candidate.
With none, the gate has nothing to measure and says so: no offline gate is claimed.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from langgraph.store.base import BaseStore

from parallax.logic.run_stats import parse_since
from parallax.logic.trace_signal import learn_task, replay_task, served_by, signal_of, task_text
from parallax.runtime.storage.stores import consumed_in, traces_in

LEASE_S = 1800.0


def _created(trace: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(trace.get("created_at") or "1970-01-01T00:00:00+00:00")


async def claim_traces(store: BaseStore | None, tenant: str, playbook: str, round_id: str, since: str | None = None,
                       limit: int | None = None, lease_s: float = LEASE_S,
                       val_size: int = 50) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(learn tasks for the claimed runs, replay tasks for the gate, a summary of what was considered).
    A bad `since` raises BadFilter."""
    after = parse_since(since)
    traces = [t for t in await traces_in(store, tenant).traces()
              if served_by(t, playbook) and (after is None or _created(t) >= after)]
    signals, no_signal, no_task = {}, 0, 0
    for trace in traces:
        if task_text(trace) is None:
            no_task += 1
        elif (signal := signal_of(trace)) is None:
            no_signal += 1
        else:
            signals[trace["trace_id"]] = (trace, signal)
    claimed, taken = await consumed_in(store, tenant, playbook).claim(list(signals), round_id, limit, lease_s)
    tasks = [learn_task(*signals[t]) for t in claimed]
    replay = [replay_task(t) for t in reversed(traces) if t.get("target") is not None and task_text(t)][:val_size]
    summary = {"considered": len(traces), "no_signal": no_signal, "task_not_kept": no_task,
               "taken_before": taken,
               "claimed": len(claimed), "by_signal": dict(Counter(t["signal"] for t in tasks)),
               "replayed_in_gate": len(replay), "consumed": 0, "round": round_id}
    return tasks, replay, summary


async def consume_runs(store: BaseStore | None, tenant: str, playbook: str, round_id: str, runs: list[dict[str, Any]]) -> int:
    """Mark the runs a batch reflected on consumed; a run whose reflection failed stays claimed until its
    claim expires, and a later round takes it again."""
    done = [str(r["task_id"]) for r in runs if r.get("reflection") is not None and r.get("task_id")]
    return await consumed_in(store, tenant, playbook).consume(done, round_id) if done else 0
