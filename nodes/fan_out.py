"""Turn the route into `Send`s: business branches plus the safety check, all in one superstep.

The branches and their grouping come from logic/branch_plans.py. All tasks start at once;
their model calls share one limit (runtime/superstep.py).
"""

from __future__ import annotations

from langgraph.runtime import get_runtime
from langgraph.types import Send

from parallax.logic.branch_plans import branch_specs, group, run_metadata
from parallax.runtime.run_context import context_of
from parallax.state.records import SafetyTask, WorkShared, WorkTask
from parallax.state.solve import SolveState


async def fan_out(state: SolveState) -> list[Send]:
    """Conditional edge after `route`: safety and business branches start together."""
    ctx = context_of(get_runtime())
    specs = branch_specs(state, ctx)
    full_text = f"{state.get('question', '')}\n{state['task']}"
    safety: SafetyTask = {"trace_id": state["trace_id"], "text": full_text}
    sends = [Send("safety", safety)]
    shared: WorkShared = {"prompts": state.get("prompts") or {}, "meta": run_metadata(state)}
    if state.get("output_schema") is not None:
        shared["output_schema"] = state["output_schema"]
    tasks: list[WorkTask] = [{"branches": branches, **shared} for branches in group(specs)]
    return sends + [Send("work", task) for task in tasks]

