"""The loop's first node: check the input, take the round slot, look again at a running canary, prepare the head.

What it does and why is in logic/loop.py (`prepare`). A round that finds a canary still
running, or another round of the playbook in progress, learns nothing and says why.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.loop import BY, new_round_id, prepare, take_slot
from parallax.logic.release_decision import check_rule, check_share
from parallax.logic.routing import validate_budget
from parallax.logic.run_stats import parse_since
from parallax.logic.trace_learning import LEASE_S
from parallax.runtime.run_context import tenant_of
from parallax.runtime.storage.namespaces import check_playbook_name
from parallax.runtime.timestamps import now_iso
from parallax.state.context import Context
from parallax.state.loop import LoopState

DEFAULTS: dict[str, Any] = {"limit": 200, "share": 10.0, "error_rate": 0.05, "margin": 0.05, "min_runs": 50,
                            "max_runs": 1600, "lease_s": LEASE_S}


class InvalidLoopInput(ValueError):
    """The loop input cannot be run; the message says what to change."""


def checked(state: LoopState) -> dict[str, Any]:
    """The round's settings with defaults, or InvalidLoopInput."""
    given = {**DEFAULTS, **{k: state[k] for k in DEFAULTS if state.get(k) is not None}}  # type: ignore[literal-required]
    try:
        check_playbook_name(state.get("playbook", "default"))
        check_share(float(given["share"]))
        check_rule(float(given["error_rate"]), float(given["margin"]), int(given["min_runs"]), int(given["max_runs"]))
        parse_since(state.get("since"))
        validate_budget(state)
    except ValueError as exc:
        raise InvalidLoopInput(str(exc)) from None
    if not isinstance(given["limit"], int) or isinstance(given["limit"], bool) or given["limit"] < 1:
        raise InvalidLoopInput(f"limit must be at least 1, got {given['limit']!r}")
    if not isinstance(given["lease_s"], (int, float)) or given["lease_s"] <= 0:
        raise InvalidLoopInput(f"lease_s must be more than 0 seconds, got {given['lease_s']!r}")
    return given


async def open_round(state: LoopState, runtime: Runtime[Context]) -> dict[str, Any]:
    if runtime.store is None:
        raise RuntimeError("the loop graph needs a store: run it on the graph API (or compile it with one)")
    given = checked(state)
    tenant, playbook = tenant_of(state.get("tenant")), state.get("playbook", "default")
    round_id = new_round_id()
    out: dict[str, Any] = {"round": round_id, "tenant": tenant, "playbook": playbook, "started_at": now_iso(), "by": BY,
                           **given, "advanced": None, "reset": None, "traces": {}, "candidate": None, "gate": None}
    holder = await take_slot(runtime.store, tenant, playbook, round_id, float(given["lease_s"]))
    if holder is not None:
        return {**out, "status": "skipped", "why": f"round {holder} of this playbook is still running"}
    prepared = await prepare(runtime.store, tenant, playbook)
    out.update(advanced=prepared.get("advanced"), reset=prepared.get("reset"))
    if prepared.get("skip"):
        return {**out, "status": "skipped", "why": prepared["skip"]}
    return {**out, "status": "learning"}
