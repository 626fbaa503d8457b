"""The planner: validate the input, then ask for a plan (or a replan) that passes the plan check.

The check (logic/plan_check.py) runs inside the planner's call, as part of parsing: a plan
with a cycle, an unknown dependency or an undeclared placeholder is re-asked with the
checker's message, at most `max_reasks` times, inside the same planning branch; then the
branch fails with that message and the run answers directly instead (first plan) or
finishes with what it has (replan). A replan identical to the plan before stops at once.
`auto` only plans a request with several deliverables or steps (logic/routing.py).
"""

from __future__ import annotations

import asyncio
import uuid

from langgraph.runtime import Runtime
from pydantic import ValidationError

from parallax.logic.plan_check import PlanError, PlanLimits, check_plan, same_plan
from parallax.logic.routing import InvalidInput, validate_plan_input, wants_plan
from parallax.prompts.plan import planner_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.run_context import authenticated_tenant, context_of
from parallax.runtime.worktrees import GitError, head_commit, repository_root
from parallax.state.context import Context
from parallax.state.plan import Plan, PlanState


async def _start(state: PlanState, ctx: Context) -> dict:
    """The first visit: checks, request and document, repository and its base commit."""
    validate_plan_input(state, ctx)
    question = state.get("question", "")
    request, document = (question, state["task"]) if question.strip() else (state["task"], "")
    start = {"trace_id": uuid.uuid4().hex, "request": request, "document": document, "round": 0, "plans": [],
             "mode": "plan", "verification": {}, "stop": ""}
    if state.get("repo"):
        if authenticated_tenant() is not None:  # an API caller must not name paths on the server's disk
            raise InvalidInput("edit tasks on a repository are not served over the graph API: "
                               "run `parallax run --mode plan --repo PATH` on the machine that holds it")
        try:
            root = await asyncio.to_thread(repository_root, state["repo"])
            start.update(repo=str(root), repo_base=await asyncio.to_thread(head_commit, root))
        except GitError as exc:
            raise InvalidInput(f"--repo {state['repo']}: {exc} (give a git repository with at least one commit)") from None
    return start


async def make_plan(state: PlanState, runtime: Runtime[Context]) -> dict:
    ctx = context_of(runtime)
    first = "round" not in state
    update = await _start(state, ctx) if first else {}
    view = {**state, **update}
    limits = PlanLimits(ctx.plan_max_tasks, has_repo=bool(view.get("repo")), has_document=bool(view["document"]))
    if first and "plan" in state:  # a caller's plan: checked like a planner's, refused as bad input
        try:
            plan = check_plan(Plan.model_validate(state["plan"]), limits)
        except (ValidationError, PlanError) as exc:
            raise InvalidInput(str(exc).splitlines()[0] if isinstance(exc, PlanError) else
                               f"invalid plan: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}") from None
        return {**update, "plan": plan.model_dump(), "plans": [plan.model_dump()], "planned": True}
    if first and state.get("mode", "auto") == "auto" and not wants_plan(view["request"]):
        return {**update, "planned": False, "plan_error": ""}
    previous = None if first else state["plan"]
    outcome = None if first else [r for r in state.get("tasks", []) if r["round"] == state["round"]]
    identity = {"id": f"plan-{uuid.uuid4().hex[:8]}", "parent_id": view["trace_id"], "kind": "plan"}
    messages = planner_messages(view["request"], len(view["document"]), limits.max_tasks, limits.has_repo,
                                previous, outcome)
    record, plan = await call_branch(identity, messages, Plan, ctx, model=ctx.reviewer_model, temperature=0.0,
                                     check=lambda p: check_plan(p, limits))
    branches = [record.model_dump()]
    if plan is None:
        if first:
            return {**update, "branches": branches, "planned": False, "plan_error": record.error or "no plan"}
        return {"branches": branches, "stop": f"no valid replan ({record.error}): finishing with what exists"}
    if previous is not None and same_plan(plan, previous):
        return {"branches": branches, "stop": "the replan was the same as the plan before: finishing with what exists"}
    return {**update, "branches": branches, "plan": plan.model_dump(), "plans": [*view.get("plans", []), plan.model_dump()],
            "planned": True, "round": view["round"] if first else state["round"] + 1}
