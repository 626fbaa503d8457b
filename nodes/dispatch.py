"""Plan mode: send every task at once; each waits for its own dependencies
(logic/dag_schedule.py)."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import get_runtime
from langgraph.types import Send

from parallax.logic.budget import fan_out_spec
from parallax.logic.routing import votes_of
from parallax.runtime.run_context import context_of, tenant_of
from parallax.runtime.services import services_of
from parallax.state.plan import PlanState, TaskPayload


async def dispatch_tasks(state: PlanState) -> list[Send] | Literal["answer_directly", "join"]:
    """Conditional edge after the planner."""
    if state.get("stop"):
        return "join"
    if not state.get("planned"):
        return "answer_directly"
    current = state["round"]
    earlier = [r for r in state.get("tasks", []) if r["round"] < current and r["status"] == "DONE"]
    votes = votes_of(state)  # the input passed validate_plan_input (start_plan)
    budget = fan_out_spec(services_of(context_of(get_runtime())), state)
    tenant = tenant_of(state.get("tenant"))

    def payload(task: dict[str, Any]) -> TaskPayload:
        sent: TaskPayload = {
            "task": task,
            "plan": state["plan"],
            "round": current,
            "trace_id": state["trace_id"],
            "request": state["request"],
            "document": state["document"],
            "earlier": earlier,
            "tenant": tenant,
            "playbook": state.get("playbook", "default"),
            "votes": votes,
        }
        if "min_votes" in state:
            sent["min_votes"] = state["min_votes"]
        if "repo" in state:
            sent["repo"] = state["repo"]
        if "repo_base" in state:
            sent["repo_base"] = state["repo_base"]
        if "test_command" in state:
            sent["test_command"] = state["test_command"]
        if state.get("candidates", 1) > 1:
            sent["candidates"] = state["candidates"]
        if budget is not None:
            sent["budget"] = budget
        return sent

    return [Send("run_task", payload(task)) for task in state["plan"]["tasks"]]
