"""The planner: a plan (or replan) that passes the plan check, or the caller's.

A failing plan is re-asked with the checker's message inside the same branch
(docs/internals/plans.md#the-plan-check).
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime
from pydantic import ValidationError

from parallax.logic.budget import run_tally
from parallax.logic.plan_check import PlanError, PlanLimits, check_plan, same_plan
from parallax.logic.routing import InvalidInput, wants_plan
from parallax.prompts.plan import planner_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of
from parallax.runtime.services import services_of
from parallax.state.context import Context, setting
from parallax.state.plan import Plan, PlanState


async def make_plan(state: PlanState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    first = not state.get("plans")
    update = {"mode": "plan"} if first else {}
    limits = PlanLimits(
        setting(ctx.plan_max_tasks),
        has_repo=bool(state.get("repo")),
        has_document=bool(state["document"]),
    )
    if first and state.get(
        "plan"
    ):  # a caller's plan: checked like a planner's, refused as bad input
        try:
            given = check_plan(Plan.model_validate(state["plan"]), limits)
        except (ValidationError, PlanError) as exc:
            raise InvalidInput(
                str(exc).splitlines()[0]
                if isinstance(exc, PlanError)
                else f"invalid plan: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}"
            ) from None
        return {
            **update,
            "plan": given.model_dump(),
            "plans": [given.model_dump()],
            "planned": True,
        }
    if first and state.get("mode", "auto") == "auto" and not wants_plan(state["request"]):
        return {"planned": False, "plan_error": ""}
    previous = None if first else state["plan"]
    outcome = None if first else [r for r in state.get("tasks", []) if r["round"] == state["round"]]
    identity = {
        "id": f"plan-{uuid.uuid4().hex[:8]}",
        "parent_id": state["trace_id"],
        "kind": "plan",
    }
    messages = planner_messages(
        state["request"],
        len(state["document"]),
        limits.max_tasks,
        limits.has_repo,
        previous,
        outcome,
    )
    with holding(run_tally(services_of(ctx), state)):
        record, plan = await call_branch(
            identity,
            messages,
            Plan,
            ctx,
            model=ctx.reviewer_model,
            temperature=0.0,
            check=lambda p: check_plan(p, limits),
        )
    branches = [record.model_dump()]
    if plan is None:
        if first:
            return {
                **update,
                "branches": branches,
                "planned": False,
                "plan_error": record.error or "no plan",
            }
        return {
            "branches": branches,
            "stop": f"no valid replan ({record.error}): finishing with what exists",
        }
    if previous is not None and same_plan(plan, previous):
        return {
            "branches": branches,
            "stop": "the replan was the same as the plan before: finishing with what exists",
        }
    return {
        **update,
        "branches": branches,
        "plan": plan.model_dump(),
        "plans": [*state.get("plans", []), plan.model_dump()],
        "planned": True,
        "round": 0 if first else state["round"] + 1,
    }
