"""The data-loop graphs for the graph API: `stats`, `feedback` and `release`, one node each.

Compiled without a store: `langgraph dev` and LangGraph Server bring theirs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.graph import END, START, StateGraph

from parallax.nodes.move_labels import move_labels
from parallax.nodes.report_stats import report_stats
from parallax.nodes.store_feedback import store_feedback
from parallax.runtime.sync_graph import both_ways
from parallax.state.context import Context
from parallax.state.data_loop import (
    FeedbackInput,
    FeedbackOutput,
    FeedbackState,
    ReleaseInput,
    ReleaseOutput,
    ReleaseState,
    StatsInput,
    StatsOutput,
    StatsState,
)


def one_node(
    state: type[Any],
    input_schema: type[Any],
    output_schema: type[Any],
    name: str,
    node: Callable[..., Awaitable[dict[str, Any]]],
) -> StateGraph[Any, Context, Any, Any]:
    builder = StateGraph(
        state, context_schema=Context, input_schema=input_schema, output_schema=output_schema
    )
    builder.add_node(name, node)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    return builder


stats_builder = one_node(StatsState, StatsInput, StatsOutput, "report_stats", report_stats)
feedback_builder = one_node(
    FeedbackState, FeedbackInput, FeedbackOutput, "store_feedback", store_feedback
)
release_builder = one_node(ReleaseState, ReleaseInput, ReleaseOutput, "move_labels", move_labels)

stats = both_ways(stats_builder.compile(name="stats"))
feedback = both_ways(feedback_builder.compile(name="feedback"))
release = both_ways(release_builder.compile(name="release"))
