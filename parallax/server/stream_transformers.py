"""Aegra patch: a graph with stream transformers of its own runs on the v2 event stream.

Works around Aegra adding its own transformers to every graph (see
docs/internals/server.md#graphs-with-their-own-stream-transformers-stream_transformerspy).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any


def registered_by_graph(graph: Any) -> set[type]:
    """The transformer classes a compiled graph registers itself (empty for anything else)."""
    return {
        spec for spec in getattr(graph, "stream_transformers", ()) or () if isinstance(spec, type)
    }


def extra_transformers(graph: Any, offered: list[Any]) -> list[Any]:
    """Aegra's extra transformers less those the graph already registers."""
    own = registered_by_graph(graph)
    return [spec for spec in offered if not (isinstance(spec, type) and spec in own)]


class OwnTransformers:
    """A compiled graph as Aegra's v3 stream driver sees it: the same graph, except that
    `astream_events` leaves out the extra transformers the graph registers itself."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)

    def astream_events(
        self, *args: Any, transformers: list[Any] | None = None, **kwargs: Any
    ) -> Any:
        return self.graph.astream_events(
            *args, transformers=extra_transformers(self.graph, list(transformers or ())), **kwargs
        )


def install() -> None:
    """Rebind Aegra's v3 stream driver where its executor finds it; a second call is a no-op."""
    from aegra_api.services import run_executor
    from aegra_api.services.event_streaming import native_stream

    original_stream = native_stream.stream_native_v3_events
    if getattr(original_stream, "parallax_own_transformers", False):
        return

    @functools.wraps(original_stream)
    async def stream_native_v3_events(
        *, graph: Any, **kwargs: Any
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        async for item in original_stream(graph=OwnTransformers(graph), **kwargs):
            yield item

    stream_native_v3_events.parallax_own_transformers = True  # type: ignore[attr-defined]
    native_stream.stream_native_v3_events = stream_native_v3_events
    run_executor.stream_native_v3_events = stream_native_v3_events
