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
Installed once, from server/app.py, by rebinding the function where Aegra's run executor
looks it up (it imported the name into its own module).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

_installed = False


def registered_by_graph(graph: Any) -> set[type]:
    """The transformer classes a compiled graph registers itself (empty for anything else)."""
    return {spec for spec in getattr(graph, "stream_transformers", ()) or () if isinstance(spec, type)}


def extra_transformers(graph: Any, offered: list[Any]) -> list[Any]:
    """Aegra's extra transformers less those the graph already registers."""
    own = registered_by_graph(graph)
    return [spec for spec in offered if not (isinstance(spec, type) and spec in own)]


def install() -> None:
    """Rebind Aegra's v3 stream driver (idempotent)."""
    global _installed
    if _installed:
        return
    from aegra_api.services import run_executor
    from aegra_api.services.event_streaming import native_stream

    original_extra: Callable[[], list[Any]] = native_stream._extra_transformers
    original_stream = native_stream.stream_native_v3_events

    async def stream_native_v3_events(*, graph: Any, **kwargs: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        offered = original_extra()
        native_stream._extra_transformers = lambda: extra_transformers(graph, offered)
        try:
            async for item in original_stream(graph=graph, **kwargs):
                yield item
        finally:
            native_stream._extra_transformers = original_extra

    native_stream.stream_native_v3_events = stream_native_v3_events
    run_executor.stream_native_v3_events = stream_native_v3_events
    _installed = True
