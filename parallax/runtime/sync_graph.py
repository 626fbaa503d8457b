"""Compiled graphs that run from synchronous code as well as from async code.

Every node of Parallax's graphs is `async`: LangGraph runs a sync node in a worker thread, a
hop per call that a plan pays on every task. LangGraph 1.x then refuses `graph.invoke`
("No synchronous function provided to 'route'"), and so would a user's synchronous
`StateGraph` that adds our graph as a subgraph (the parent calls the subgraph's `invoke`).

`both_ways(graph)` gives a compiled graph a synchronous `stream` (which `invoke` is built on)
that runs the graph's own `astream` on an event loop of its own, in a worker thread, handing
each chunk over as it comes and carrying the caller's context variables (LangGraph keeps the
parent run's config in one). The async path is untouched: `ainvoke`, `astream`, `langgraph dev`
and the deployed server run exactly as before. Closing the stream early cancels the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from langgraph.graph.state import CompiledStateGraph

T = TypeVar("T")
Compiled = TypeVar("Compiled", bound=CompiledStateGraph[Any, Any, Any, Any])
_END = object()


def iterate(make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """The items of the async iterator `make()` returns, produced on a private event loop in a worker thread."""
    handoff: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
    running: dict[str, Any] = {}

    async def pump() -> None:
        running["loop"], running["task"] = asyncio.get_running_loop(), asyncio.current_task()
        try:
            async for item in make():
                handoff.put((True, item))
        except BaseException as exc:  # handed to the caller's thread, raised there
            handoff.put((False, exc))
            return
        handoff.put((False, _END))

    thread = threading.Thread(target=contextvars.copy_context().run, args=(asyncio.run, pump()),
                              name="parallax-sync-graph", daemon=True)
    thread.start()
    finished = False
    try:
        while True:
            is_item, value = handoff.get()
            if is_item:
                yield value
                continue
            finished = True
            if value is _END:
                return
            raise value
    finally:
        if not finished and "loop" in running:  # the caller stopped early: cancel the run
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing left to cancel
                running["loop"].call_soon_threadsafe(running["task"].cancel)
        thread.join()


class SyncAndAsyncGraph(CompiledStateGraph[Any, Any, Any, Any]):
    """A compiled state graph whose synchronous `stream` and `invoke` run its async nodes (see the module)."""

    def stream(self, input: Any, config: Any = None, **kwargs: Any) -> Iterator[Any]:
        return iterate(lambda: self.astream(input, config, **kwargs))


def both_ways(graph: Compiled) -> Compiled:
    """`graph` (compiled by LangGraph) made usable with `invoke`/`stream` too; returns the same object."""
    graph.__class__ = SyncAndAsyncGraph  # type: ignore[assignment]  # a subclass swapped in at runtime
    return graph
