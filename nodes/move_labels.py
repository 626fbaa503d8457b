"""The `release` graph's node: start, decide or look at a canary in the server's store.

The same steps as `parallax playbook|prompts release|canary` (logic/releases.py).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.graph_inputs import RULE_DEFAULTS, validate_release_input
from parallax.logic.release_decision import check_rule
from parallax.logic.releases import canary_view, end_release, labels_of, release
from parallax.runtime.run_context import tenant_of
from parallax.state.context import Context
from parallax.state.data_loop import ReleaseState


async def move_labels(state: ReleaseState, runtime: Runtime[Context]) -> dict[str, Any]:
    store = runtime.store
    if store is None:
        raise RuntimeError(
            "the release graph needs a store: run it on the graph API (or compile it with one)"
        )
    validate_release_input(
        state
    )  # a version to release, a share and a decision rule within their bounds
    tenant, subject, action = tenant_of(state.get("tenant")), state["subject"], state["action"]
    by, reason = state.get("by", "api"), state.get("reason", "")
    if action == "release":
        share = state.get("canary")
        given: dict[str, Any] = {**RULE_DEFAULTS, **state}
        rule = check_rule(
            given["error_rate"], given["margin"], given["min_runs"], given["max_runs"]
        )
        await release(
            store,
            tenant,
            subject,
            state["version"],
            share,
            by,
            reason,
            rule,
            state.get("manual", False),
        )
    elif action in ("promote", "rollback"):
        await end_release(
            labels_of(store, tenant, subject), action, by, reason or f"{action} by a person"
        )
    return {"view": await canary_view(store, tenant, subject)}
