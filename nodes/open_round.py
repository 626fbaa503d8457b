"""The loop's first node: check the input, take the round slot, prepare the head.

See logic/loop.py `prepare`.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.graph_inputs import validate_loop_input
from parallax.logic.loop import BY, new_round_id, prepare, take_slot
from parallax.runtime.run_context import tenant_of
from parallax.runtime.timestamps import now_iso
from parallax.state.context import Context
from parallax.state.loop import LoopState


async def open_round(state: LoopState, runtime: Runtime[Context]) -> dict[str, Any]:
    if runtime.store is None:
        raise RuntimeError(
            "the loop graph needs a store: run it on the graph API (or compile it with one)"
        )
    given = validate_loop_input(state)  # the round's settings, defaults filled in, or InvalidInput
    tenant, playbook = tenant_of(state.get("tenant")), state.get("playbook", "default")
    round_id = new_round_id()
    out: dict[str, Any] = {
        "round": round_id,
        "tenant": tenant,
        "playbook": playbook,
        "started_at": now_iso(),
        "by": BY,
        **given,
        "advanced": None,
        "reset": None,
        "traces": {},
        "candidate": None,
        "gate": None,
    }
    holder = await take_slot(runtime.store, tenant, playbook, round_id, float(given["lease_s"]))
    if holder is not None:
        return {
            **out,
            "status": "skipped",
            "why": f"round {holder} of this playbook is still running",
        }
    prepared = await prepare(runtime.store, tenant, playbook)
    out.update(advanced=prepared.get("advanced"), reset=prepared.get("reset"))
    if prepared.get("skip"):
        return {**out, "status": "skipped", "why": prepared["skip"]}
    return {**out, "status": "learning"}
