"""The `plan` graph: plan a DAG of tasks, run each as soon as its inputs exist, verify, join.

The drawing is in docs/plan.md. `graph` has no checkpointer or store; the CLI compiles `builder`
with SQLite ones. Nodes and edges are `async` (graphs/solve.py says why).
"""

from __future__ import annotations

from functools import partial
from typing import Literal

from langgraph.graph import END, START, StateGraph

from parallax.graphs.solve import builder as solve_builder
from parallax.nodes.answer_directly import answer_directly
from parallax.nodes.dispatch import dispatch_tasks
from parallax.nodes.integrate import integrate
from parallax.nodes.join import join
from parallax.nodes.plan import make_plan
from parallax.nodes.record_trace import record_plan_trace
from parallax.nodes.run_task import run_task, run_task_failed
from parallax.nodes.start_plan import start_plan
from parallax.nodes.verify import verify
from parallax.runtime.sync_graph import both_ways
from parallax.state.context import Context
from parallax.state.plan import PlanInput, PlanOutput, PlanState

# compiled without a checkpointer of its own: a task's solve run is a subgraph checkpointed under
# the task (LangGraph 1.2 fails on checkpointer=False under a parent run with durability="sync")
solve = solve_builder.compile(name="solve")


async def after_join(state: PlanState) -> Literal["make_plan", "integrate", "record_trace"]:
    if state.get("decision") == "replan":
        return "make_plan"
    return "integrate" if state.get("repo") else "record_trace"


builder = StateGraph(
    PlanState, context_schema=Context, input_schema=PlanInput, output_schema=PlanOutput
)
builder.add_node("start_plan", start_plan)
builder.add_node("make_plan", make_plan)
builder.add_node("run_task", partial(run_task, solve=solve), error_handler=run_task_failed)
builder.add_node("verify", verify, defer=True)
builder.add_node("join", join)
builder.add_node("integrate", integrate)
builder.add_node("answer_directly", partial(answer_directly, solve=solve))
builder.add_node(
    "record_trace", record_plan_trace, input_schema=PlanState
)  # the solve node, given the plan keys too

builder.add_edge(START, "start_plan")
builder.add_edge("start_plan", "make_plan")
builder.add_conditional_edges("make_plan", dispatch_tasks, ["run_task", "answer_directly", "join"])
builder.add_edge("run_task", "verify")
builder.add_edge("verify", "join")
builder.add_conditional_edges("join", after_join)
builder.add_edge("integrate", "record_trace")
builder.add_edge("answer_directly", "record_trace")
builder.add_edge("record_trace", END)

graph = both_ways(builder.compile(name="plan"))
