"""A served run joins its caller's OpenTelemetry trace: `traceparent` travels in the run's config.

See docs/internals/server.md#trace-context.
"""

from __future__ import annotations

from typing import Any

from starlette.types import Scope

from parallax.runtime.telemetry import TRACE_CONTEXT


def carry_trace_context(scope: Scope, payload: dict[str, Any]) -> None:
    """Put the request's `traceparent` / `tracestate` into the run's config (the create-run body
    `payload`)."""
    headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
    config = payload.get("config") if isinstance(payload.get("config"), dict) else None
    configurable = (
        config.get("configurable")
        if config is not None and isinstance(config.get("configurable"), dict)
        else None
    )
    if configurable is not None:
        configurable.pop(TRACE_CONTEXT, None)
    if not headers.get("traceparent"):
        return
    carried = {name: headers[name] for name in ("traceparent", "tracestate") if headers.get(name)}
    payload["config"] = {
        **(config or {}),
        "configurable": {**(configurable or {}), TRACE_CONTEXT: carried},
    }
