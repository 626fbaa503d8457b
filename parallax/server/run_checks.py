"""The graph API refuses a run that cannot run before Aegra stores it: 422 with the reason, no run (ASGI middleware).

Why: Aegra checks a run request's shape (its pydantic model) but not what Parallax's graphs need,
so a bad input was stored as a run, executed, and ended in `error` with the reason only in the
run's row ("InvalidInput: execution failed" on the stream). Every face that starts runs on the
server goes through these endpoints (langgraph-sdk and RemoteGraph directly; /v1 and /mcp on
loopback, server/openai_face.py and server/mcp_face.py), so one check here covers them all.

On each run creation (POST /threads/{id}/runs[/stream|/wait], /runs[/stream|/wait], and the
crons' /runs/crons, /threads/{id}/runs/crons), for a caller with a valid key:
- the graph is the `assistant_id`: a graph id, or an assistant's id looked up in Aegra's table;
- its `context` must be run settings within their bounds and within the server's own settings
  (logic/run_input.py `checked_context`, served), whatever the graph: every Parallax graph takes the
  same Context;
- its input must be valid for its graph (logic/run_input.py `check_run_input`, served: each graph's
  one definition, unknown fields refused by name, the graph's own checks); a run on a thread that has
  run before may leave the task (or a chat's message) out (the thread holds it);
- a named playbook other than "default" must exist for the caller's tenant (the store table),
  as the run's first node would find (nodes/route.py).
The answer is Aegra's error body, 422 {"error": "validation_error", "message", "details":
{"field"}}, `field` naming the input key or `context.<name>` at fault.

The Agent Protocol v2 commands that start a run (`run.start`, `input.respond` on POST
/threads/{id}/commands; server/event_socket.py asks `command_problem` for those sent on the
WebSocket) are checked the same way, as the run Aegra would build from them (its
services/event_streaming/commands.py): `run.start`'s `input` is the run's input unless the thread
is interrupted, where Aegra takes it as the answer to the interrupt (a resume: only the context
is checked, as for a classic run resumed with a `command`); `input.respond` is a resume of the
assistant named or, else, of the thread's latest run. The answer is that route's own error
shape: HTTP 200 with the protocol's envelope {"type": "error", "id", "error": "invalid_argument",
"message"}, as Aegra answers a command's other bad params (langgraph-sdk raises "Protocol error
[invalid_argument]: <message>"). No run and no thread are created (the SDK mints a thread's id,
and Aegra creates the thread with the first run).

Also: GET /threads/{id}/runs of a thread the caller does not own (another tenant's, or none)
is 404, as every other route of a thread answers, not an empty list.

Why a middleware and not Aegra's auth hook (`@auth.on.threads.create_run`, server/auth.py): the
hook sees the run after Aegra has accepted the request, and its error is the hook's, not the
validation error; and the stateless routes would need a second hook. Checks that need the run
itself (a document's bytes, a repository) stay in the graph's first node.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.responses import JSONResponse

from parallax.logic.run_input import GRAPHS, RunInputError, check_run_input, checked_context
from parallax.runtime.storage.namespaces import playbook_namespace
from parallax.server.connections import connection
from parallax.server.protocol_requests import COMMANDS, RUN_COMMANDS, settle_interrupt, starts_with_input
from parallax.server.run_requests import ASGIApp, Receive, Scope, Send, replay, tenant_request

RUN_CREATE = re.compile(r"^(?:/threads/(?P<thread_id>[^/]+))?/runs(?:/stream|/wait|/crons)?/?$")
THREAD_RUNS = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/?$")
PLAYBOOK_READERS = ("solve", "plan", "chat")
"""Graphs whose run reads a named playbook (the others create it, or read none)."""


def refusal(message: str, field: str | None) -> JSONResponse:
    return JSONResponse({"error": "validation_error", "message": message, "details": {"field": field}}, status_code=422)


def not_found(thread_id: str) -> JSONResponse:
    return JSONResponse({"error": "not_found", "message": f"Thread '{thread_id}' not found", "details": None},
                        status_code=404)


async def graph_of(assistant_id: Any) -> str | None:
    """The graph an `assistant_id` runs: a graph id as it is, an assistant's id from Aegra's table (None: unknown)."""
    if not isinstance(assistant_id, str):
        return None
    if assistant_id in GRAPHS:
        return assistant_id
    async with connection() as conn:
        row = await (await conn.execute("SELECT graph_id FROM assistant WHERE assistant_id = %s",
                                        (assistant_id,))).fetchone()
    return str(row[0]) if row else None


async def thread_owner(thread_id: str) -> str | None:
    async with connection() as conn:
        row = await (await conn.execute("SELECT user_id FROM thread WHERE thread_id = %s", (thread_id,))).fetchone()
    return str(row[0]) if row else None


async def thread_has_run(thread_id: str) -> bool:
    async with connection() as conn:
        row = await (await conn.execute("SELECT 1 FROM runs WHERE thread_id = %s LIMIT 1", (thread_id,))).fetchone()
    return row is not None


async def playbook_exists(tenant: str, name: str) -> bool:
    """Whether the tenant's playbook `name` has any record (the CLI's `require_known` asks the same of its store)."""
    async with connection() as conn:
        row = await (await conn.execute("SELECT 1 FROM store WHERE prefix = %s LIMIT 1",
                                        (".".join(playbook_namespace(tenant, name)),))).fetchone()
    return row is not None


async def problem(payload: dict[str, Any], tenant: str, thread_id: str | None) -> RunInputError | None:
    """Why a run request cannot run (the 422's message and field), or None."""
    graph = await graph_of(payload.get("assistant_id"))
    if graph not in GRAPHS:
        return None  # Aegra answers an unknown assistant (404) or a missing one (422)
    try:
        checked_context(payload.get("context"), served=True)
        run_input = payload.get("input")
        if run_input is not None:
            bare = isinstance(run_input, dict) and not any(run_input.get(k) for k in ("task", "document", "pages",
                                                                                      "messages"))
            follow_up = bare and thread_id is not None and await thread_has_run(thread_id)  # one query, when needed
            check_run_input(graph, run_input, payload.get("context"), continues_thread=follow_up, served=True)
            playbook = run_input.get("playbook", "default") if graph in PLAYBOOK_READERS else "default"
            if playbook != "default" and not await playbook_exists(tenant, playbook):
                raise RunInputError(f"unknown playbook {playbook!r} for tenant {tenant!r}: learn or import it first, "
                                    "or leave playbook out to use 'default'", "playbook")
    except RunInputError as exc:
        return exc
    return None


async def thread_run_state(thread_id: str, tenant: str) -> tuple[str | None, str | None]:
    """(the thread's status, the assistant of its latest run) for the tenant; (None, None): no such thread of its."""
    async with connection() as conn:
        row = await (await conn.execute(
            "SELECT t.status, (SELECT r.assistant_id FROM runs r WHERE r.thread_id = t.thread_id AND r.user_id = %s "
            "ORDER BY r.created_at DESC LIMIT 1) FROM thread t WHERE t.thread_id = %s AND t.user_id = %s",
            (tenant, thread_id, tenant))).fetchone()
    return (None, None) if row is None else (row[0], row[1])


async def command_problem(command: Any, tenant: str, thread_id: str) -> RunInputError | None:
    """Why the run a v2 `run.start` / `input.respond` would start cannot run, or None (other commands, malformed
    ones: Aegra answers those). Call it once a pending interrupt has settled (protocol_requests.settle_interrupt)."""
    params = command.get("params") if isinstance(command, dict) else None
    if not isinstance(params, dict) or command.get("method") not in RUN_COMMANDS:
        return None
    status, last_assistant = await thread_run_state(thread_id, tenant)
    if command["method"] == "run.start":
        resume = params.get("input") is not None and status == "interrupted"  # Aegra's reading of it
        payload = {**params, "input": None if resume else params.get("input")}
    else:
        payload = {**params, "assistant_id": params.get("assistant_id") or last_assistant, "input": None}
    return await problem(payload, tenant, thread_id)


def command_refusal(command_id: Any, why: RunInputError) -> dict[str, Any]:
    """The protocol's error envelope for a command whose run cannot run."""
    return {"type": "error", "id": command_id, "error": "invalid_argument", "message": str(why)}


class RunChecks:
    """The middleware (server/app.py adds it outermost: a refused run never reaches double-texting or Aegra)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope.get("method"), scope.get("path", "")
        if scope["type"] != "http" or method not in ("GET", "POST"):
            await self.app(scope, receive, send)
            return
        if method == "GET" and (listing := THREAD_RUNS.match(path)):
            await self.list_runs(scope, receive, send, listing["thread_id"])
            return
        create = RUN_CREATE.match(path) if method == "POST" else None
        command = COMMANDS.match(path) if method == "POST" else None
        if create is None and command is None:
            await self.app(scope, receive, send)
            return
        if (request := await tenant_request(self.app, scope, receive, send)) is None:
            return  # Aegra answers it: 422, 401
        body, payload, tenant = request
        if create is None:
            assert command is not None
            if starts_with_input(payload):
                await settle_interrupt(command["thread_id"], tenant)
            why = await command_problem(payload, tenant, command["thread_id"])
            answer = None if why is None else JSONResponse(command_refusal(payload.get("id"), why))
        else:
            why = await problem(payload, tenant, create["thread_id"])
            answer = None if why is None else refusal(str(why), why.field)
        if answer is not None:
            await answer(scope, receive, send)
            return
        await self.app(scope, replay(body, receive), send)

    async def list_runs(self, scope: Scope, receive: Receive, send: Send, thread_id: str) -> None:
        from parallax.server.auth import key_from, tenant_for_key

        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        tenant = tenant_for_key(key_from(headers))
        if tenant is not None and await thread_owner(thread_id) != tenant:
            await not_found(thread_id)(scope, receive, send)
            return
        await self.app(scope, receive, send)
