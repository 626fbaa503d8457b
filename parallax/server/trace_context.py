"""A served run joins its caller's OpenTelemetry trace: the W3C `traceparent` of the request that created it
travels in the run's config to whichever replica's worker runs it.

Aegra queues a run through Redis and a worker (maybe on another replica) runs it long after the HTTP
request is gone, so the request's trace context cannot ride on the worker's own context. It is copied
into the run's `config.configurable` under `parallax_trace_context` (runtime/telemetry.py TRACE_CONTEXT),
which the checkpoint keeps with the run (a replica that takes the run over reads it too); the trace
node makes the run's root span a child of the caller's span from it. A caller's own value under that key
is dropped: the context comes from the request's headers or not at all.
"""

from __future__ import annotations

from typing import Any

from starlette.types import Scope

from parallax.runtime.telemetry import TRACE_CONTEXT


def carry_trace_context(scope: Scope, payload: dict[str, Any]) -> None:
    """Put the request's `traceparent` / `tracestate` into the run's config (the create-run body `payload`)."""
    headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
    config = payload.get("config") if isinstance(payload.get("config"), dict) else None
    configurable = config.get("configurable") if config is not None and isinstance(config.get("configurable"), dict) else None
    if configurable is not None:
        configurable.pop(TRACE_CONTEXT, None)
    if not headers.get("traceparent"):
        return
    carried = {name: headers[name] for name in ("traceparent", "tracestate") if headers.get(name)}
    payload["config"] = {**(config or {}), "configurable": {**(configurable or {}), TRACE_CONTEXT: carried}}
