"""The `learn` graph: runs -> traces -> reflections -> operations -> a gated new version.

    start -> next_batch -> [learn_from_task x B] -> consolidate -> gate -> commit -> next_batch ...

The solve graph is handed to three nodes, compiled without a checkpointer (evaluations repeat).
"""

from __future__ import annotations

from functools import partial

from langgraph.graph import END, START, StateGraph

from parallax.graphs.solve import builder as solve_builder
from parallax.nodes.commit import commit
from parallax.nodes.consolidate import consolidate
from parallax.nodes.gate import gate
from parallax.nodes.learn_from_task import learn_from_task, learn_from_task_failed
from parallax.nodes.schedule import dispatch, next_batch, start
from parallax.runtime.sync_graph import both_ways
from parallax.state.context import Context
from parallax.state.learn import LearnInput, LearnOutput, LearnState

solve = solve_builder.compile(checkpointer=False, name="solve")

builder = StateGraph(
    LearnState, context_schema=Context, input_schema=LearnInput, output_schema=LearnOutput
)
builder.add_node("start", partial(start, solve=solve))
builder.add_node("next_batch", next_batch)
builder.add_node(
    "learn_from_task", partial(learn_from_task, solve=solve), error_handler=learn_from_task_failed
)
builder.add_node("consolidate", consolidate, defer=True)
builder.add_node("gate", partial(gate, solve=solve))
builder.add_node("commit", commit)

builder.add_edge(START, "start")
builder.add_edge("start", "next_batch")
builder.add_conditional_edges("next_batch", dispatch, ["learn_from_task", END])
builder.add_edge("learn_from_task", "consolidate")
builder.add_edge("consolidate", "gate")
builder.add_edge("gate", "commit")
builder.add_edge("commit", "next_batch")

graph = both_ways(builder.compile(name="learn"))
