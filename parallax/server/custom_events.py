"""Aegra patch: a named custom event reaches `thread.extensions[name]` as the graph wrote it.

See docs/internals/server.md#named-custom-events-custom_eventspy.
"""

from __future__ import annotations

import functools
from typing import Any


def install() -> None:
    """Wrap Aegra's custom-event shaping in its thread event session; a second call changes
    nothing."""
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
