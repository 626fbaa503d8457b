"""The `solve` graph: route, fan out to branches beside a safety check, merge, arbitrate.

The drawing is in docs/how-it-works.md. `graph` has no checkpointer or store (the CLI compiles
`builder` with SQLite ones); every node is `async`, since LangGraph runs a sync one in a thread.
"""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from parallax.nodes.candidate import candidate, candidate_failed
from parallax.nodes.fan_out import fan_out, next_wave
from parallax.nodes.judge import judge
from parallax.nodes.merge import merge
from parallax.nodes.pick import pick
from parallax.nodes.record_trace import record_trace
from parallax.nodes.red_team import red_team
from parallax.nodes.release_check import release_check
from parallax.nodes.route import route
from parallax.nodes.safety import check_safety
from parallax.nodes.work import work, work_failed
from parallax.runtime.sync_graph import both_ways
from parallax.state.context import Context
from parallax.state.solve import SolveInput, SolveOutput, SolveState


async def after_merge(
    state: SolveState,
) -> Literal["judge", "pick", "red_team", "record_trace"] | list[Send]:
    if state["mode"] == "speculate":
        # the verifier: the first candidate that passed its check, or the judge's tournament
        return "pick"
    if state.get("next_wave"):
        return await next_wave(
            state
        )  # an adaptive vote that has not settled: its next wave, then merge again
    if state["status"] == "failed":
        return "record_trace"
    if (
        state["mode"] == "vote"
        and not state.get("consensus")
        and state.get("output_schema") is None
    ):
        return "judge"  # a typed vote names its unsettled fields instead (logic/field_vote.py)
    return "red_team" if state.get("red_team") else "record_trace"


async def after_judge(state: SolveState) -> Literal["red_team", "record_trace"]:
    return "red_team" if state.get("red_team") and state.get("answer") else "record_trace"


builder = StateGraph(
    SolveState, context_schema=Context, input_schema=SolveInput, output_schema=SolveOutput
)
builder.add_node("route", route)
builder.add_node("safety", check_safety)
builder.add_node("work", work, error_handler=work_failed)
builder.add_node("merge", merge, defer=True)
builder.add_node("judge", judge)
builder.add_node("candidate", candidate, error_handler=candidate_failed)
builder.add_node("pick", pick)
builder.add_node("red_team", red_team)
builder.add_node("record_trace", record_trace)
builder.add_node("release_check", release_check)

builder.add_edge(START, "route")
builder.add_conditional_edges("route", fan_out, ["safety", "work", "candidate"])
builder.add_edge("safety", "merge")
builder.add_edge("work", "merge")
builder.add_edge("candidate", "merge")
builder.add_conditional_edges(
    "merge", after_merge, ["judge", "pick", "red_team", "record_trace", "work"]
)
builder.add_conditional_edges("judge", after_judge)
builder.add_conditional_edges("pick", after_judge)
builder.add_edge("red_team", "record_trace")
builder.add_edge("record_trace", "release_check")
builder.add_edge("release_check", END)

graph = both_ways(builder.compile(name="solve"))
