"""The `loop` graph: one round of the closed loop, stored runs -> candidate -> gate -> canary.

    START -> open_round -> learn_round -> close_round -> END

The learn graph runs inside `learn_round`, without a checkpointer: a round that dies is redone.
"""

from __future__ import annotations

from functools import partial
from typing import Literal

from langgraph.graph import END, START, StateGraph

from parallax.graphs.learn import builder as learn_builder
from parallax.nodes.close_round import close_round
from parallax.nodes.learn_round import learn_round
from parallax.nodes.open_round import open_round
from parallax.runtime.sync_graph import both_ways
from parallax.state.context import Context
from parallax.state.loop import LoopInput, LoopOutput, LoopState

learn = learn_builder.compile(checkpointer=False, name="learn")


def after_open(state: LoopState) -> Literal["learn_round", "close_round"]:
    return "close_round" if state.get("status") == "skipped" else "learn_round"


builder = StateGraph(
    LoopState, context_schema=Context, input_schema=LoopInput, output_schema=LoopOutput
)
builder.add_node("open_round", open_round)
builder.add_node("learn_round", partial(learn_round, learn=learn))
builder.add_node("close_round", close_round)

builder.add_edge(START, "open_round")
builder.add_conditional_edges("open_round", after_open, ["learn_round", "close_round"])
builder.add_edge("learn_round", "close_round")
builder.add_edge("close_round", END)

graph = both_ways(builder.compile(name="loop"))
