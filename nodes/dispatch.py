"""Send every task of the plan at once; the tasks wait for their own dependencies (logic/dag_schedule.py).

One `Send("run_task")` per task, all in one superstep: LangGraph saves each task's result
as soon as it finishes, and the tasks start one another by finishing, not by levels.
Without a plan the run answers directly; after a stopped replan it goes straight to the joiner.
"""

from __future__ import annotations

from typing import Literal

from langgraph.types import Send

from parallax.logic.routing import requested_votes
from parallax.state.plan import PlanState, TaskPayload

CARRIED = ("tenant", "playbook", "votes", "min_votes", "repo", "repo_base", "test_command")


async def dispatch_tasks(state: PlanState) -> list[Send] | Literal["answer_directly", "join"]:
    """Conditional edge after the planner."""
    if state.get("stop"):
        return "join"
    if not state.get("planned"):
        return "answer_directly"
    current = state["round"]
    earlier = [r for r in state.get("tasks", []) if r["round"] < current and r["status"] == "DONE"]
    base: dict = {"plan": state["plan"], "round": current, "trace_id": state["trace_id"], "request": state["request"],
                  "document": state["document"], "earlier": earlier, "tenant": state.get("tenant", "default"),
                  "playbook": state.get("playbook", "default"), "votes": requested_votes(state)}
    base.update({k: state[k] for k in CARRIED if k in state and k not in base})
    return [Send("run_task", TaskPayload(task=task, **base)) for task in state["plan"]["tasks"]]
