"""Aegra patch: a named custom event reaches `thread.extensions[name]` as the graph wrote it.

A node that writes `get_stream_writer()({"name": "progress", "step": ...})` means the event for
the `progress` extension: langgraph-sdk subscribes to the channel `custom:progress` and its
ExtensionsDecoder yields the events whose `data.name` is "progress", as they were written (its
integration suite reads `event["step"]`). Aegra 0.11's thread event session wraps every plain
`custom` payload as `{"payload": data}` before it filters by name (`session._custom_events`), so
the name is one level down, no `custom:<name>` subscription ever matched, and the extension
stayed empty. langgraph-sdk's test_extensions fails on it; `langgraph dev` passes it.

The patch (one function, what we would send upstream): a plain `custom` payload that is a dict
with a string `name` goes on the wire as written; any other payload keeps Aegra's `{"payload":
...}` wrap, and `custom:<name>` channels (a StreamTransformer's) keep Aegra's `{name, payload}`.
Made at start by server/aegra_patches.py.
"""

from __future__ import annotations

import functools
from typing import Any


def install() -> None:
    """Wrap Aegra's custom-event shaping in its thread event session; a second call changes nothing."""
    from aegra_api.services.event_streaming import session

    wrapped = session._custom_events
    if getattr(wrapped, "parallax_named", False):
        return

    @functools.wraps(wrapped)
    def custom_events(method: str, data: Any, namespace: list[str]) -> list[Any]:
        if method == "custom" and isinstance(data, dict) and isinstance(data.get("name"), str):
            return [("custom", data, namespace)]
        result: list[Any] = wrapped(method, data, namespace)
        return result

    custom_events.parallax_named = True  # type: ignore[attr-defined]
    session._custom_events = custom_events
