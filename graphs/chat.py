"""The `chat` graph: a conversation for Studio's chat mode and chat pages, over the solve graph.

    START -> condense_turn -> answer_turn -> review_answer? -> END

The solve graph is handed to the turn's node without a checkpointer of its own, so its run is
checkpointed under the turn (docs/internals/runs.md#chat-turns-and-reviews). Nodes are `async`.
"""

from __future__ import annotations

from functools import partial
from typing import Literal

from langgraph.graph import END, START, StateGraph

from parallax.graphs.solve import builder as solve_builder
from parallax.nodes.answer_turn import answer_turn
from parallax.nodes.condense_turn import condense_turn
from parallax.nodes.review_answer import review_answer
from parallax.runtime.sync_graph import both_ways
from parallax.state.chat import ChatInput, ChatOutput, ChatState
from parallax.state.context import Context

solve = solve_builder.compile(name="solve")


async def after_answer(state: ChatState) -> Literal["review_answer", "__end__"]:
    return "review_answer" if state["last_run"].get("status") == "needs_review" else "__end__"


builder = StateGraph(
    ChatState, context_schema=Context, input_schema=ChatInput, output_schema=ChatOutput
)
builder.add_node("condense_turn", condense_turn)
builder.add_node("answer_turn", partial(answer_turn, solve=solve))
builder.add_node("review_answer", review_answer)

builder.add_edge(START, "condense_turn")
builder.add_edge("condense_turn", "answer_turn")
builder.add_conditional_edges("answer_turn", after_answer)
builder.add_edge("review_answer", END)

graph = both_ways(builder.compile(name="chat"))
