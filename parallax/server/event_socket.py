"""The thread event stream over WebSocket: `WS /threads/{thread_id}/stream/events`.

Aegra serves the stream as SSE only. See
docs/internals/server.md#the-thread-event-stream-over-websocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from fastapi import APIRouter, HTTPException, WebSocket, WebSocketDisconnect

from parallax.server.refusals import Refused

router = APIRouter()


def _bad(command_id: Any, message: str) -> dict[str, Any]:
    return {"type": "error", "id": command_id, "error": "invalid_argument", "message": message}


@router.websocket("/threads/{thread_id}/stream/events")  # type: ignore[untyped-decorator]
async def thread_events_socket(websocket: WebSocket, thread_id: str) -> None:
    from aegra_api.api.event_streaming import _verify_thread_owned_or_new
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.orm import _get_session_maker
    from aegra_api.models import User
    from aegra_api.services.event_streaming.capabilities import get_v2_capabilities

    from parallax.server.auth import user_fields
    from parallax.server.caller import caller_of

    caller = caller_of(websocket.scope)
    if caller is None:
        await websocket.close(code=1008)
        return
    user = User(**user_fields(caller))
    try:
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
                command = _frame(raw)
            except Refused as refused:
                await send(_bad(None, refused.message))
                continue
            if (
                not isinstance(command, dict)
                or not isinstance(command.get("id"), int)
                or not isinstance(command.get("method"), str)
            ):
                await send(
                    _bad(
                        command.get("id") if isinstance(command, dict) else None,
                        "Protocol commands must include an integer id and string method.",
                    )
                )
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
                await send(await _command(thread_id, caller, user, command))
    except WebSocketDisconnect:
        pass
    finally:
        if forwarding is not None:
            forwarding.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await forwarding


def _subscription(thread_id: str, user: Any, params: dict[str, Any]) -> Any:
    """Aegra's thread event session for the SSE body given as a subscribe's params (ValueError: bad
    params)."""
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
    return ThreadEventSession(
        thread_id,
        channels=channels,
        list_run_ids=_thread_run_lister(thread_id, user),
        since=body.since,
        namespaces=body.namespaces,
        depth=body.depth,
    )


async def _forward(stream: Any, send: Any, websocket: WebSocket) -> None:
    """Each event envelope as one text frame; when the stream ends, close the socket cleanly
    (1000)."""
    async for envelope in stream.stream():
        await send(envelope)
    with contextlib.suppress(Exception):
        await websocket.close(code=1000)


def _frame(raw: str) -> Any:
    """A frame's command: at most PARALLAX_MAX_BODY_BYTES, JSON at most PARALLAX_MAX_JSON_DEPTH
    deep; Refused else."""
    from parallax.runtime import settings as settings_mod
    from parallax.server.json_body import parse, too_large

    settings = settings_mod.load()
    if len(raw) > settings.max_body_bytes:
        raise too_large(settings.max_body_bytes, "the command")
    try:
        return parse(raw, settings.max_json_depth, "the command")
    except Refused as refused:
        if refused.status == 400:
            raise Refused(400, "Protocol commands must be valid JSON.") from None
        raise


async def _command(
    thread_id: str, caller: Any, user: Any, command: dict[str, Any]
) -> dict[str, Any]:
    """A run.start, input.respond, ... handled as POST /threads/{id}/commands handles it, with the
    same admission (server/admission.py `admit_command`), each refusal as the protocol's error
    envelope and before anything is stored."""
    from aegra_api.core.orm import _get_session_maker
    from aegra_api.services.event_streaming.commands import handle_command

    from parallax.server.admission import admit_command

    command = {"params": {}, **command}
    try:
        command = await admit_command(caller, thread_id, command)
    except Refused as refused:
        return refused.envelope(command["id"])
    async with _get_session_maker()() as session:
        response, _run_id = await handle_command(
            command, session=session, thread_id=thread_id, user=user
        )
    result: dict[str, Any] = response
    return result
