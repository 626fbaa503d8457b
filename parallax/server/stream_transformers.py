"""Aegra patch: a graph that registers its own stream transformers still runs on the v2 event stream.

The failure it fixes: langgraph-sdk's sample `agent` graph (libs/sdk-py/integration, compiled
with `transformers=[CustomTransformer, UpdatesTransformer]`, as LangGraph's docs show for a
graph that wants the `updates` and `custom` channels) failed every run started through the
thread event stream with "Transformer UpdatesTransformer returned projection keys that conflict
with already-registered keys: 'updates'". Not a version mismatch (the server venv and the
clients run the same langgraph): Aegra 0.11's `native_stream.stream_native_v3_events` always
passes its own `[UpdatesTransformer, CustomTransformer, CheckpointsTransformer,
TasksTransformer]` to `graph.astream_events(version="v3", transformers=...)`, and LangGraph's
StreamMux refuses two transformers that project the same key. langgraph-api passes only what
the graph module asks for, so the same graph runs there.

The patch (small, what we would send upstream to Aegra): pass only the extra transformers whose
class the graph has not registered itself (`graph.stream_transformers`, compile time), so each
channel has one owner. A graph without transformers of its own gets all four, as before.
Aegra's stream driver is handed the graph behind a thin view whose `astream_events` drops the
transformers the graph owns; nothing of Aegra's is swapped while a stream runs, so concurrent
streams of different graphs cannot see each other's choice. Made at start by
server/aegra_patches.py, by rebinding the driver where Aegra's run executor looks it up (it
imported the name into its own module).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any


def registered_by_graph(graph: Any) -> set[type]:
    """The transformer classes a compiled graph registers itself (empty for anything else)."""
    return {spec for spec in getattr(graph, "stream_transformers", ()) or () if isinstance(spec, type)}


def extra_transformers(graph: Any, offered: list[Any]) -> list[Any]:
    """Aegra's extra transformers less those the graph already registers."""
    own = registered_by_graph(graph)
    return [spec for spec in offered if not (isinstance(spec, type) and spec in own)]


class OwnTransformers:
    """A compiled graph as Aegra's v3 stream driver sees it: the same graph, except that `astream_events` leaves
    out the extra transformers the graph registers itself."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)

    def astream_events(self, *args: Any, transformers: list[Any] | None = None, **kwargs: Any) -> Any:
        return self.graph.astream_events(*args, transformers=extra_transformers(self.graph, list(transformers or ())),
                                         **kwargs)


def install() -> None:
    """Rebind Aegra's v3 stream driver (module docstring); a second call changes nothing."""
    from aegra_api.services import run_executor
    from aegra_api.services.event_streaming import native_stream

    original_stream = native_stream.stream_native_v3_events
    if getattr(original_stream, "parallax_own_transformers", False):
        return

    @functools.wraps(original_stream)
    async def stream_native_v3_events(*, graph: Any, **kwargs: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        async for item in original_stream(graph=OwnTransformers(graph), **kwargs):
            yield item

    stream_native_v3_events.parallax_own_transformers = True  # type: ignore[attr-defined]
    native_stream.stream_native_v3_events = stream_native_v3_events
    run_executor.stream_native_v3_events = stream_native_v3_events
