"""Commit an accepted candidate as the next playbook version, or keep it as rejected.

Each batch's entry says which training tasks failed and why; with `from_traces` the batch's runs are
marked consumed or released here (docs/internals/learning.md#learning-from-stored-runs).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.failures import failures_by_cause
from parallax.logic.trace_learning import LEASE_S, consume_runs, mark_committing
from parallax.runtime.run_context import tenant_of
from parallax.runtime.storage.playbook_store import CommitVoided
from parallax.runtime.storage.stores import playbooks_in
from parallax.state.context import Context
from parallax.state.learn import LearnState
from parallax.state.playbook import Operation


async def consumed(
    state: LearnState, runtime: Runtime[Context], dropped: bool = False
) -> dict[str, Any]:
    """With `from_traces`: mark the runs this batch reflected on consumed, after the version (or the
    rejected candidate) is written, so a learn run killed before then leaves them to a later round
    (`dropped`: nothing was written, leave them); release (or give up) the runs whose reflection
    failed."""
    found = dict(state.get("traces") or {})
    if state.get("from_traces"):
        went = await consume_runs(
            runtime.store,
            tenant_of(state.get("tenant")),
            state["playbook"],
            state["learn_run_id"],
            state.get("runs", []),
            dropped,
        )
        for key, n in went.items():
            found[key] = found.get(key, 0) + n
    return found


async def commit(state: LearnState, runtime: Runtime[Context]) -> dict[str, Any]:
    store = playbooks_in(runtime.store, tenant_of(state.get("tenant")))
    candidate, decision = state["candidate"], state["decision"]
    name, metrics = state["playbook"], decision["metrics"]
    held = [entry for run in state.get("runs", []) for entry in run.get("quarantined", [])]
    await store.quarantine(state["playbook"], held)
    operations = [Operation.model_validate(o) for o in candidate["operations"]]
    report = candidate["report"]
    batch = {
        "batch": state["batch_index"],
        "reflections": candidate["reflections"],
        "operations": len(operations),
        "items_added": int(report.get("items_added", 0)),
        "guard_triggered": candidate["guard_triggered"],
        "accepted": decision["accepted"],
        "reason": decision["reason"],
        "train_accuracy": candidate["train_accuracy"],
        "val_accuracy": metrics.get("val_accuracy_after"),
        "quarantined": len(held),
        "failures": failures_by_cause(state.get("runs", [])),
        "val_failures": metrics.get("val_failures", {}),
        "failed_tasks": [
            {"task_id": r.get("task_id"), "cause": r["cause"], "error": r["error"]}
            for r in state.get("runs", [])
            if r.get("cause")
        ],
    }
    # one batch of one learn run commits once: a run taken over after its commit finds that version
    # again
    key = f"{state['learn_run_id']}-b{state['batch_index']}"
    if not operations:
        head = await store.head(name)
        return {
            "traces": await consumed(state, runtime),
            "batches": [{**batch, "version": head.version, "items_total": len(head.active)}],
        }
    if state.get("from_traces") and (
        lost := await mark_committing(
            runtime.store,
            tenant_of(state.get("tenant")),
            name,
            state["learn_run_id"],
            state.get("runs", []),
            key,
            float(state.get("lease_s", LEASE_S)),
        )
    ):
        return await left_to_another_round(
            state,
            runtime,
            batch,
            f"another round claimed {len(lost)} of this batch's "
            "runs after this round's claim on them expired",
        )
    try:
        if not decision["accepted"]:
            candidate_id = await store.reject(
                name,
                candidate["base_version"],
                operations,
                state["learn_run_id"],
                metrics,
                decision["reason"],
                key=key,
            )
            head = await store.head(name)
            return {
                "traces": await consumed(state, runtime),
                "batches": [
                    {
                        **batch,
                        "version": head.version,
                        "candidate": candidate_id,
                        "items_total": len(head.active),
                    }
                ],
            }
        version = await store.commit(
            name,
            candidate["base_version"],
            operations,
            state["learn_run_id"],
            metrics,
            note=decision["reason"],
            key=key,
        )
    except CommitVoided:
        return await left_to_another_round(
            state,
            runtime,
            batch,
            "another round took this batch's runs over after "
            "this round's claim on them expired, and gave up its commit",
        )
    update = {
        "traces": await consumed(state, runtime),
        "to_version": version.version,
        "head_version": version.version,
        "accepted": True,
        "batches": [{**batch, "version": version.version, "items_total": len(version.active)}],
    }
    if metrics.get("evaluated"):
        update.update(
            head_accuracy=metrics["val_accuracy_after"],
            val_accuracy_after=metrics["val_accuracy_after"],
            head_results=decision.get("results") or {},
        )
    return update


async def left_to_another_round(
    state: LearnState, runtime: Runtime[Context], batch: dict[str, Any], why: str
) -> dict[str, Any]:
    """A batch committed nothing because another round took some of its runs
    (runtime/storage/consumed.py): that round learns them; this one leaves its runs unconsumed and
    says why."""
    head = await playbooks_in(runtime.store, tenant_of(state.get("tenant"))).head(state["playbook"])
    return {
        "traces": await consumed(state, runtime, dropped=True),
        "batches": [
            {
                **batch,
                "accepted": False,
                "version": head.version,
                "reason": (
                    f"{why}: nothing learned from the batch is committed (that round learns the"
                    " runs)"
                ),
                "items_total": len(head.active),
            }
        ],
    }
