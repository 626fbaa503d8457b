"""A graph for the Agent Protocol conformance tests (tests/integration/test_agent_protocol.py); no
model.

Why its shape: it is what the conformance checks need and Parallax's own graphs do not have.
- compiled with stream transformers of its own (`transformers=[CustomTransformer,
  UpdatesTransformer]`, as LangGraph documents for a graph that wants the `updates` and
  `custom` channels, and as langgraph-sdk's sample `agent` graph does): Aegra's v3 stream
  used to refuse it (server/stream_transformers.py);
- it pauses on `interrupt(...)` (the thread stream's `interrupted` / `run.respond`) unless the
  input says not to ask, and can sleep (`sleep_s`) so a run is still going when it is cancelled;
- `items` grows by one entry per step, so a thread's state after a run is exact.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.stream.transformers import CustomTransformer, UpdatesTransformer
from langgraph.types import interrupt


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    ask: bool
    sleep_s: float


async def work(state: State) -> dict[str, Any]:
    get_stream_writer()({"name": "progress", "step": "work"})  # for thread.extensions["progress"]
    await asyncio.sleep(state.get("sleep_s", 0.0))
    return {"items": ["worked"]}


def ask(state: State) -> dict[str, Any]:
    if not state.get("ask", True):
        return {"items": ["not asked"]}
    answer = interrupt("continue?")
    return {"items": [f"asked:{answer}"]}


_builder = StateGraph(State)
_builder.add_node("work", work)
_builder.add_node("ask", ask)
_builder.add_edge(START, "work")
_builder.add_edge("work", "ask")
_builder.add_edge("ask", END)
graph = _builder.compile(transformers=[CustomTransformer, UpdatesTransformer])
