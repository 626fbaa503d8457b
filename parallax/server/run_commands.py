"""The v2 commands that start a run pass Aegra's `threads.create_run` hook, as a classic run creation does (ASGI middleware).

Why: Aegra 0.11 runs the hook where a run is created the classic way (api/runs.py, `_apply_create_run_auth`, before
the run is stored), but its commands route (api/event_streaming.py `post_thread_command` -> services/event_streaming/
commands.py `handle_command` -> run_preparation `_prepare_run`) goes straight to storing the run. So the hook's
per-tenant backpressure (server/auth.py `admit_run`: PARALLAX_MAX_PENDING runs pending or running -> 429 "busy")
did not hold for `run.start` / `input.respond`, and a busy tenant could queue runs without limit there. Here the
hook runs for those two commands, before Aegra sees them, so a refused command stores nothing (no run, no thread:
the SDK mints a thread's id and Aegra creates the thread with its first run).

The answers, each the shape the transport already uses for a refusal of its kind:
- POST /threads/{id}/commands: the hook's HTTPException as Aegra answers it on a classic run (server/app.py
  `error_with_headers`): 429, `Retry-After`, {"error", "message", "details"}; the same as the daily budget's 429
  on that route. langgraph-sdk's thread stream raises httpx.HTTPStatusError (a 429: what its stream code counts as
  retryable). A command's bad params stay HTTP 200 with the protocol's error envelope (server/run_checks.py).
- a command sent on the WebSocket (server/event_socket.py), which has no status of its own: the protocol's error
  envelope {"type": "error", "id", "error", "message"}, `error` as Aegra's `handle_command` maps a status (403
  permission_denied, 404 no_such_run) and, for the 429, Aegra's own error type for it, "unknown_error" (the
  Agent Protocol has no code for "come back later"; the message says when).

Order on the commands route, as on a classic run: the 422 checks (server/run_checks.py), the daily budget
(server/tenant_budgets.py), then this hook. The hook reads the runs table and Aegra stores the run afterwards, as on
the classic routes: requests arriving at the same moment can pass PARALLAX_MAX_PENDING by a few (docs/deploy.md,
"Backpressure").
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from parallax.server.protocol_requests import COMMANDS, RUN_COMMANDS
from parallax.server.run_requests import ASGIApp, Receive, Scope, Send, json_request, replay

ERROR_CODES = {403: "permission_denied", 404: "no_such_run", 429: "unknown_error"}
"""The protocol's error code for a status the hook raised (Aegra's mapping; 429 as Aegra's error body names it)."""


async def create_run_refusal(user: Any, thread_id: str, command: dict[str, Any]) -> Any:
    """The HTTPException Aegra's `threads.create_run` hook raises for the run a `run.start` / `input.respond` would
    start (its params are the run's fields), or None: allowed, or not a command that starts a run."""
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from fastapi import HTTPException

    params = command.get("params")
    if command.get("method") not in RUN_COMMANDS or not isinstance(params, dict):
        return None
    try:
        await handle_event(build_auth_context(user, "threads", "create_run"), {**params, "thread_id": thread_id})
    except HTTPException as exc:
        return exc
    return None


def envelope(command_id: Any, refused: Any) -> dict[str, Any]:
    """A refusal of the hook as the protocol's error envelope (a command sent on the WebSocket)."""
    return {"type": "error", "id": command_id, "error": ERROR_CODES.get(refused.status_code, "invalid_argument"),
            "message": str(refused.detail)}


class RunCommands:
    """The middleware (server/app.py adds it just inside the daily budgets)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = COMMANDS.match(scope.get("path", "")) if scope["type"] == "http" and scope.get("method") == "POST" \
            else None
        if found is None:
            await self.app(scope, receive, send)
            return
        body, payload, tenant = await json_request(scope, receive)
        if tenant is not None and isinstance(payload, dict) and payload.get("method") in RUN_COMMANDS:
            from aegra_api.core.auth_deps import require_auth
            from aegra_api.models.errors import AgentProtocolError, get_error_type
            from starlette.requests import Request

            user = await require_auth(Request(scope))  # the key is valid (tenant): Aegra's user for it
            refused = await create_run_refusal(user, found["thread_id"], payload)
            if refused is not None:
                answer = AgentProtocolError(error=get_error_type(refused.status_code), message=refused.detail,
                                            details=getattr(refused, "details", None))
                await JSONResponse(answer.model_dump(), status_code=refused.status_code,
                                   headers=refused.headers)(scope, receive, send)
                return
        await self.app(scope, replay(body, receive), send)
