"""The `release` graph's node: start a canary, decide one, or look at it, in the server's store.

The same steps as `parallax playbook|prompts release|canary` (logic/releases.py); every
label move records `by` and `reason`.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.release_decision import check_rule, check_share
from parallax.logic.releases import canary_view, end_release, labels_of, release
from parallax.runtime.run_context import tenant_of
from parallax.state.context import Context
from parallax.state.data_loop import ReleaseState


async def move_labels(state: ReleaseState, runtime: Runtime[Context]) -> dict[str, Any]:
    store = runtime.store
    if store is None:
        raise RuntimeError("the release graph needs a store: run it on the graph API (or compile it with one)")
    tenant, subject, action = tenant_of(state.get("tenant")), state["subject"], state["action"]
    by, reason = state.get("by", "api"), state.get("reason", "")
    if action == "release":
        if "version" not in state:
            raise ValueError("release needs a version")
        share = state.get("canary")
        if share is not None and share < 100:
            check_share(share)
        rule = check_rule(state.get("error_rate", 0.05), state.get("margin", 0.05), state.get("min_runs", 50),
                          state.get("max_runs", 1600))
        await release(store, tenant, subject, state["version"], share, by, reason, rule, state.get("manual", False))
    elif action in ("promote", "rollback"):
        await end_release(labels_of(store, tenant, subject), action, by, reason or f"{action} by a person")
    return {"view": await canary_view(store, tenant, subject)}
