"""Compiled graphs that run from synchronous code as well as from async code.

See docs/internals/process.md#graphs-that-run-from-synchronous-code.
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
    """The items of the async iterator `make()` returns, produced on a private event loop in a
    worker thread."""
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

    thread = threading.Thread(
        target=contextvars.copy_context().run,
        args=(asyncio.run, pump()),
        name="parallax-sync-graph",
        daemon=True,
    )
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
            with contextlib.suppress(
                RuntimeError
            ):  # the loop closed meanwhile: nothing left to cancel
                running["loop"].call_soon_threadsafe(running["task"].cancel)
        thread.join()


class SyncAndAsyncGraph(CompiledStateGraph[Any, Any, Any, Any]):
    """A compiled state graph whose synchronous `stream` and `invoke` run its async nodes (see the
    module)."""

    def stream(self, input: Any, config: Any = None, **kwargs: Any) -> Iterator[Any]:
        return iterate(lambda: self.astream(input, config, **kwargs))


def both_ways(graph: Compiled) -> Compiled:
    """`graph` (compiled by LangGraph) made usable with `invoke`/`stream` too; returns the same
    object."""
    graph.__class__ = SyncAndAsyncGraph  # type: ignore[assignment]  # a subclass swapped in at runtime
    return graph
