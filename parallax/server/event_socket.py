"""The WebSocket transport of the thread event stream: `WS /threads/{thread_id}/stream/events`.

Why: langgraph-sdk's `threads.stream(..., transport="websocket")` (and its sync twin) opens this
socket, and langgraph-api serves it (`api/event_streaming.py`, `_thread_websocket`). Aegra 0.11
serves the same stream only as SSE (`POST /threads/{id}/stream/events`) and the route has no
WebSocket twin, so the handshake was refused (403). Upstream: Aegra has no WebSocket route at
all; this module is the patch we would offer it, built only from Aegra's own stream pieces.

The protocol, as the SDK speaks it and langgraph-api answers it: every inbound frame is a
command `{"id": int, "method": str, "params": {...}}`; a malformed one gets
`{"type": "error", "id", "error": "invalid_argument", "message"}` and the socket stays open.
- `subscription.subscribe` (the SDK sends it first, with the SSE body as params: channels,
  namespaces, depth, since) starts forwarding the thread's events (Aegra's `ThreadEventSession`,
  the same source as the SSE route) as one JSON text frame per event envelope; a second
  subscribe replaces the first; `subscription.unsubscribe` stops it. Both are answered
  `{"type": "success", "id", "result": {}}`.
- any other method (run.start, input.respond, ...) goes to Aegra's command handler, exactly
  as `POST /threads/{id}/commands` does, after the same checks (a run's input, the daily budget,
  the per-tenant backpressure), and its response envelope is sent back.
When the event stream ends (the thread's runs finished and the idle grace passed) the socket
is closed with 1000, which the SDK reads as a clean end.

Authentication is Aegra's (the same backend as every HTTP route: the key in the handshake's
headers); a caller without a valid key, or naming another tenant's thread, is refused before the
socket is accepted (the handshake fails with 403, as Starlette answers a socket closed before
accept).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from fastapi import APIRouter, HTTPException, WebSocket, WebSocketDisconnect

router = APIRouter()


def _bad(command_id: Any, message: str) -> dict[str, Any]:
    return {"type": "error", "id": command_id, "error": "invalid_argument", "message": message}


@router.websocket("/threads/{thread_id}/stream/events")  # type: ignore[untyped-decorator]
async def thread_events_socket(websocket: WebSocket, thread_id: str) -> None:
    from aegra_api.api.event_streaming import _verify_thread_owned_or_new
    from aegra_api.core.auth_deps import require_auth
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.orm import _get_session_maker
    from aegra_api.services.event_streaming.capabilities import get_v2_capabilities

    try:
        user = await require_auth(websocket)  # reads only the scope and headers: a WebSocket does
        await handle_event(build_auth_context(user, "threads", "read"), {"thread_id": thread_id})
        async with _get_session_maker()() as session:
            await _verify_thread_owned_or_new(session, thread_id, user)
    except HTTPException:
        await websocket.close(code=1008)
        return
    if not get_v2_capabilities().ok:
        await websocket.close(code=1011, reason="event streaming is disabled on this server")
        return
    await websocket.accept()
    forwarding: asyncio.Task[None] | None = None
    send_lock = asyncio.Lock()

    async def send(payload: dict[str, Any]) -> None:
        async with send_lock:
            await websocket.send_text(json.dumps(payload, default=str))

    try:
        while True:
            raw = await websocket.receive_text()
            try:
                command = json.loads(raw)
            except ValueError:
                await send(_bad(None, "Protocol commands must be valid JSON."))
                continue
            if not isinstance(command, dict) or not isinstance(command.get("id"), int) \
                    or not isinstance(command.get("method"), str):
                await send(_bad(command.get("id") if isinstance(command, dict) else None,
                                "Protocol commands must include an integer id and string method."))
                continue
            method, command_id = command["method"], command["id"]
            if method == "subscription.subscribe":
                given = command.get("params")
                params: dict[str, Any] = given if isinstance(given, dict) else {}
                try:
                    stream = _subscription(thread_id, user, params)
                except ValueError as exc:
                    await send(_bad(command_id, str(exc)))
                    continue
                if forwarding is not None:
                    forwarding.cancel()
                forwarding = asyncio.create_task(_forward(stream, send, websocket))
                await send({"type": "success", "id": command_id, "result": {}})
            elif method == "subscription.unsubscribe":
                if forwarding is not None:
                    forwarding.cancel()
                    forwarding = None
                await send({"type": "success", "id": command_id, "result": {}})
            else:
                await send(await _command(thread_id, user, command))
    except WebSocketDisconnect:
        pass
    finally:
        if forwarding is not None:
            forwarding.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await forwarding


def _subscription(thread_id: str, user: Any, params: dict[str, Any]) -> Any:
    """Aegra's thread event session for the SSE body given as a subscribe's params (ValueError: bad params)."""
    from aegra_api.api.event_streaming import _thread_run_lister
    from aegra_api.models.event_streaming import EventStreamRequest
    from aegra_api.services.event_streaming.session import ThreadEventSession, validate_channels
    from pydantic import ValidationError

    try:
        body = EventStreamRequest.model_validate(params)
    except ValidationError as exc:
        raise ValueError(f"subscription.subscribe params: {exc.errors()[0]['msg']}") from None
    channels, invalid = validate_channels(body.channels)
    if invalid:
        raise ValueError(f"Unsupported channels: {', '.join(invalid)}")
    return ThreadEventSession(thread_id, channels=channels, list_run_ids=_thread_run_lister(thread_id, user),
                              since=body.since, namespaces=body.namespaces, depth=body.depth)


async def _forward(stream: Any, send: Any, websocket: WebSocket) -> None:
    """Each event envelope as one text frame; when the stream ends, close the socket cleanly (1000)."""
    async for envelope in stream.stream():
        await send(envelope)
    with contextlib.suppress(Exception):
        await websocket.close(code=1000)


ERROR_CODES = {403: "permission_denied", 404: "no_such_run", 429: "unknown_error"}
"""The protocol's error code for a status the create_run hook raised: Aegra's mapping (`handle_command`) and, for
backpressure's 429, the error type Aegra's HTTP body gives it (the protocol has no code for "come back later";
the message says when)."""


async def _command(thread_id: str, user: Any, command: dict[str, Any]) -> dict[str, Any]:
    """A run.start, input.respond, ... handled as POST /threads/{id}/commands handles it, with the same checks in
    the same order, each refusal as the protocol's error envelope and before anything is stored: the run's input
    and context (server/run_checks.py), the tenant's daily budget (server/tenant_budgets.py), and Aegra's
    threads.create_run hook, which Aegra's route enforcer (aegra_api/core/auth_registry.py) runs for that route and
    which holds Parallax's per-tenant backpressure (server/auth.py)."""
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.orm import _get_session_maker
    from aegra_api.services.event_streaming.commands import handle_command

    from parallax.server import metrics
    from parallax.server.protocol_requests import settle_interrupt, starts_with_input
    from parallax.server.run_checks import command_problem, command_refusal
    from parallax.server.tenant_budgets import admit_command

    command = {"params": {}, **command}
    if starts_with_input(command):
        await settle_interrupt(thread_id, user.identity)
    if (why := await command_problem(command, user.identity, thread_id)) is not None:
        return command_refusal(command["id"], why)
    refused = await admit_command(user.identity, command)  # the tenant's daily budget (server/tenant_budgets.py)
    if refused is not None:
        metrics.BUDGET_REFUSALS.labels(face="graph_api").inc()
        return {"type": "error", "id": command["id"], "error": "insufficient_quota",
                "message": str(refused.body["message"])}
    try:
        await handle_event(build_auth_context(user, "threads", "create_run"), {**command, "thread_id": thread_id})
    except HTTPException as exc:
        return {"type": "error", "id": command["id"], "error": ERROR_CODES.get(exc.status_code, "invalid_argument"),
                "message": str(exc.detail)}
    async with _get_session_maker()() as session:
        response, _run_id = await handle_command(command, session=session, thread_id=thread_id, user=user)
    result: dict[str, Any] = response
    return result
