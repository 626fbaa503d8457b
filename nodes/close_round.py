"""The loop's last node: release a passed candidate on canary, record the round, free the slot.

The round record, written once here, is what `parallax loop status` lists.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.loop import canary_state, free_slot, gate_of, release_candidate, save_round
from parallax.logic.release_decision import Rule
from parallax.runtime.run_context import tenant_of
from parallax.runtime.storage.stores import playbooks_in
from parallax.runtime.timestamps import now_iso
from parallax.state.context import Context
from parallax.state.loop import LoopOutput, LoopState


async def close_round(state: LoopState, runtime: Runtime[Context]) -> dict[str, Any]:
    store, tenant, playbook = runtime.store, tenant_of(state.get("tenant")), state["playbook"]
    assert store is not None  # open_round refused to start without one
    update: dict[str, Any] = {}
    learned = state.get("learned")
    if learned is not None:
        rule = Rule(
            float(state["error_rate"]),
            float(state["margin"]),
            int(state["min_runs"]),
            int(state["max_runs"]),
        )
        canary = await release_candidate(
            store, tenant, playbook, learned, float(state["share"]), rule
        )
        last = (learned.get("batches") or [{}])[-1]
        started = (
            learned.get("accepted")
            and canary.get("version") == learned.get("to_version")
            and canary["state"] == "collecting"
        )
        update = {
            "canary": canary,
            "gate": gate_of(learned) if learned.get("batches") else None,
            "candidate": (
                {
                    "version": learned["to_version"] if learned.get("accepted") else None,
                    "from_version": learned.get("from_version"),
                    "accepted": bool(learned.get("accepted")),
                    "items_added": last.get("items_added", 0),
                    "reason": last.get("reason", ""),
                }
                if learned.get("batches")
                else None
            ),
            "status": "learned" if started else "nothing",
            "why": (
                (
                    f"v{learned['to_version']} on canary for {state['share']:g}% of threads"
                    if started
                    else last.get("reason") or "no new runs with a signal to learn from"
                )
                + (f"; {learned['budget_stop']}" if learned.get("budget_stop") else "")
            ),
        }
    else:
        update = {"canary": canary_state(await playbooks_in(store, tenant).labels(playbook).get())}
    record = {
        k: v
        for k, v in {**state, **update, "finished_at": now_iso()}.items()
        if k in LoopOutput.__annotations__
    }
    await save_round(store, tenant, playbook, record)
    await free_slot(store, tenant, playbook, state["round"])  # only if this round holds it
    return record
