"""Plan mode's shortcut: the request runs through the solve graph as one task.

Taken when `auto` saw a single ask, or when the planner could not make a valid plan (the reason
then quotes the checker).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.evaluate import Solver
from parallax.runtime.run_context import context_of, subgraph_config, tenant_of
from parallax.state.context import Context
from parallax.state.plan import PlanState

PASSED_ON = ("question", "votes", "min_votes", "red_team", "playbook")
TAKEN = (
    "answer",
    "mode",
    "status",
    "confidence",
    "vote_counts",
    "failed_branches",
    "objection",
    "playbook_version",
    "verification",
)


async def answer_directly(
    state: PlanState, runtime: Runtime[Context], *, solve: Solver
) -> dict[str, Any]:
    """`solve` is the solve graph (graphs/plan.py hands it in)."""
    fallback = bool(state.get("plan_error"))
    given: Mapping[str, Any] = state
    run_input = {
        "task": state["task"],
        "mode": "direct" if fallback else "auto",
        "parent_trace": state["trace_id"],
        "tenant": tenant_of(state.get("tenant")),
        **{k: given[k] for k in PASSED_ON if k in given},
    }
    run = await solve.ainvoke(run_input, subgraph_config(), context=context_of(runtime))
    why = f"no valid plan ({state['plan_error']}): answered directly" if fallback else ""
    return {
        **{k: run[k] for k in TAKEN if k in run},
        "branches": run.get("branches", []),
        "reason": "; ".join(x for x in (why, run.get("reason", "")) if x),
    }
