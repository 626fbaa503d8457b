"""Admission: the one door of `parallax serve`, passed by every request before Aegra or a face.

Checks the key before the body, the body's size and depth, a run's fields and the tenant's room
(backpressure, daily budget), then does what Aegra leaves undone (webhooks, double-texting); nothing
is stored before the last check. See docs/deploy.md#admission and docs/internals/server.md.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, get_args

from starlette.responses import JSONResponse, Response

from parallax.logic.run_input import GRAPHS, RunInputError, check_run_input, checked_context
from parallax.runtime import settings as settings_mod
from parallax.server import conformance, metrics, ownership, tenant_budgets
from parallax.server.auth import backpressure, pending_runs
from parallax.server.caller import (
    SCOPE_KEY,
    Caller,
    Unauthenticated,
    authenticate,
    key_from,
    lowered,
)
from parallax.server.cron_requests import prepare_cron
from parallax.server.json_body import PAYLOAD_KEY, parse, read_capped
from parallax.server.protocol_requests import answer_cancel, answer_cron, assistant_path
from parallax.server.refusals import Refused, invalid
from parallax.server.run_checks import (
    ThreadFacts,
    assistant_of,
    checkpoint_on_thread,
    playbook_exists,
    settled_status,
    thread_facts,
)
from parallax.server.run_fields import (
    check_config,
    check_metadata,
    check_resume,
    check_run_fields,
    check_run_start,
    check_state_update,
    check_strategy,
    configurable_settings,
)
from parallax.server.run_requests import DoubleText, arm_webhook, check_webhook
from parallax.server.trace_context import carry_trace_context

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC = frozenset(
    {
        "/",
        "/ok",
        "/health",
        "/ready",
        "/live",
        "/info",
        "/docs",
        "/redoc",
        "/openapi.json",
        "/docs/oauth2-redirect",
        "/favicon.ico",
    }
)
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RUN_COMMANDS = ("run.start", "input.respond")
"""The v2 commands that start a run."""
PLAYBOOK_READERS = ("solve", "plan", "chat")
"""The graphs whose input names a playbook to read (it must exist; learn creates one, the others
read none)."""
ROUTES: list[tuple[frozenset[str], re.Pattern[str], str]] = [
    (
        frozenset({"POST"}),
        re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs(?:/stream|/wait)?/?$"),
        "run",
    ),
    (frozenset({"POST"}), re.compile(r"^/runs(?:/stream|/wait)?/?$"), "run"),
    (frozenset({"POST"}), re.compile(r"^(?:/threads/(?P<thread_id>[^/]+))?/runs/crons/?$"), "cron"),
    (frozenset({"PATCH"}), re.compile(r"^/runs/crons/(?P<cron_id>[^/]+)/?$"), "cron"),
    (frozenset({"POST"}), re.compile(r"^/threads/(?P<thread_id>[^/]+)/commands/?$"), "command"),
    (frozenset({"POST"}), re.compile(r"^/threads/(?P<thread_id>[^/]+)/state/?$"), "state"),
    (frozenset({"POST"}), re.compile(r"^/threads/?$"), "thread"),
    (frozenset({"PATCH"}), re.compile(r"^/threads/(?P<thread_id>[^/]+)/?$"), "thread"),
    (frozenset({"POST"}), re.compile(r"^/assistants/?$"), "assistant"),
    (frozenset({"PATCH"}), re.compile(r"^/assistants/(?P<assistant_id>[^/]+)/?$"), "assistant"),
    (frozenset({"GET"}), re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/?$"), "run_list"),
    (
        frozenset({"POST"}),
        re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)/cancel/?$"),
        "cancel",
    ),
    (
        frozenset({"PATCH"}),
        re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)/?$"),
        "run_status_update",
    ),
]
"""Aegra's routes admission does more than the common checks for: (methods, path, what it does)."""
FACES = (
    ("/v1/", "openai"),
    ("/v1", "openai"),
    ("/mcp", "mcp"),
    ("/timeline/", "timeline"),
    ("/a2a/", "a2a"),
)
A2A_CARD = re.compile(r"^/a2a/[^/]+/\.well-known/agent-card\.json$")
"""An assistant's A2A agent card: public, as the protocol has it (it names no tenant's data;
server/a2a_face.py)."""


def route_of(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    for methods, pattern, kind in ROUTES:
        if method in methods and (found := pattern.match(path)):
            return kind, {k: v for k, v in found.groupdict().items() if v is not None}
    return None


def face_of(path: str) -> str:
    return next(
        (face for prefix, face in FACES if path == prefix.rstrip("/") or path.startswith(prefix)),
        "graph",
    )


def refusal_response(face: str, refused: Refused) -> Response:
    """A refusal in the shape of the face asked."""
    if face == "openai":
        from parallax.server.openai_face import error_response, openai_refusal

        return error_response(openai_refusal(refused))
    if face == "a2a":  # a JSON-RPC error, its HTTP status kept
        from parallax.server.a2a_face import refusal_response as a2a_refusal

        return a2a_refusal(refused)
    response = refused.response()
    if refused.status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands `body` over once, then whatever the client sends (its disconnect)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def with_length(scope: Scope, length: int) -> Scope:
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
    return {**scope, "headers": [*headers, (b"content-length", str(length).encode())]}


@dataclass(frozen=True)
class Admitted:
    """A run request that passed: its graph (None: an assistant Aegra will answer for) and what its
    tenant has left of today's budget (None: no budget)."""

    graph: str | None
    left: Any = None
    resumes: bool = False


def _as_refused(exc: RunInputError) -> Refused:
    return invalid(str(exc), exc.field)


def context_of(
    given: Any, configurable: dict[str, Any], assistant_context: dict[str, Any]
) -> dict[str, Any]:
    """The run's context as Aegra will build it: the caller's, else config.configurable's run
    settings, over the assistant's. config.configurable is checked here under its own name (422
    naming it); the whole is checked once by the caller of this, with the run's input
    (logic/run_input.py, served)."""
    try:
        if given is not None and not isinstance(given, dict):
            checked_context(given, served=True)  # refuses what is no object, naming context
        if configurable:
            checked_context(configurable, "config.configurable", served=True)
    except RunInputError as exc:
        raise _as_refused(exc) from None
    return {**assistant_context, **(given or configurable or {})}


def check_context(context: dict[str, Any]) -> None:
    """A run's whole context within its bounds and the server's own settings (served), when it has
    no input."""
    try:
        checked_context(context or None, served=True)
    except RunInputError as exc:
        raise _as_refused(exc) from None


async def admit_run(
    caller: Caller, payload: dict[str, Any], thread_id: str | None, *, cron: bool = False
) -> Admitted:
    """Admission's steps 4 and 5 (docs/deploy.md#admission) for one run request: a run route's
    body, a cron's, or the run a v2 command would start. Refused at the first problem."""
    checkpoint, resumes, resume = check_run_fields(payload, thread_id)
    assistant = await assistant_of(payload.get("assistant_id"), caller.tenant)
    if assistant is None:
        return Admitted(None)  # Aegra answers an unknown assistant (404) or a missing one (422)
    thread = await thread_facts(thread_id) if thread_id is not None else ThreadFacts()
    if thread.owner is not None and not ownership.sees(caller, thread.owner, thread.user):
        raise Refused(404, f"Thread '{thread_id}' not found")
    graph = assistant.graph
    ownership.check_graph(caller, graph, payload.get("input"))
    if graph in GRAPHS:
        context = context_of(
            payload.get("context"), configurable_settings(payload.get("config")), assistant.context
        )
        run_input = payload.get("input")
        if run_input is None:
            check_context(context)
        else:
            # the graph's one definition of its input, and the context with it (logic/run_input.py)
            try:
                check_run_input(
                    graph, run_input, context or None, continues_thread=thread.has_run, served=True
                )
            except RunInputError as exc:
                raise _as_refused(exc) from None
            playbook = (
                run_input.get("playbook", "default") if isinstance(run_input, dict) else "default"
            )
            if (
                graph in PLAYBOOK_READERS
                and playbook != "default"
                and not await playbook_exists(caller.tenant, str(playbook))
            ):
                raise invalid(
                    f"unknown playbook {playbook!r} for tenant {caller.tenant!r}: learn or import"
                    " it first, or leave playbook out to use 'default'",
                    "playbook",
                )
    if resumes:
        check_resume(graph, resume)
    if not cron and (busy := await backpressure(caller)) is not None:
        raise busy
    left = None
    if settings_mod.load().daily_budgets:
        refused, left = await tenant_budgets.admission(caller.tenant)
        if refused is not None:
            metrics.BUDGET_REFUSALS.labels(face="graph_api").inc()
            raise refused
    if resumes:
        assert thread_id is not None
        status = (
            await settled_status(thread_id, caller.tenant) if thread.owner is not None else None
        )
        if status != "interrupted":
            raise Refused(
                409,
                f"thread {thread_id} is not waiting for an answer (its status: {status or 'new'}): "
                "there is nothing to resume; send input to start a run",
                "command.resume",
            )
    if checkpoint is not None:
        assert thread_id is not None
        if thread.owner is None or not await checkpoint_on_thread(thread_id, checkpoint):
            raise Refused(
                404,
                f"checkpoint {checkpoint} is not one of thread {thread_id}'s: a run starts from its"
                " own thread's checkpoints",
                "checkpoint_id",
            )
    return Admitted(graph, left, resumes)


def command_as_run(
    method: str, params: dict[str, Any], resumes_input: bool, last_assistant: str | None
) -> dict[str, Any]:
    """The run request a v2 command would create, as Aegra builds it
    (services/event_streaming/commands.py)."""
    common = {
        k: params.get(k) for k in ("config", "context", "metadata") if params.get(k) is not None
    }
    if method == "run.start":
        run = {
            **common,
            "assistant_id": params.get("assistant_id"),
            **{
                k: params[k]
                for k in ("interrupt_before", "interrupt_after")
                if params.get(k) is not None
            },
        }
        strategy = params.get("multitaskStrategy", params.get("multitask_strategy"))
        if strategy is not None:
            run["multitask_strategy"] = strategy
        if resumes_input:
            return {**run, "command": {"resume": params.get("input")}}
        return {**run, "input": params.get("input")}
    for refused in ("update", "goto"):
        if params.get(refused) is not None:
            check_run_fields(
                {"command": {refused: params[refused]}}, None
            )  # refused by name, as on a run
    responses = params.get("responses")
    if isinstance(responses, list):
        resume: Any = {
            str(r.get("interrupt_id")): r.get("response") for r in responses if isinstance(r, dict)
        }
    elif params.get("interrupt_id") is not None:
        resume = {str(params["interrupt_id"]): params.get("response")}
    else:
        resume = params.get("response")
    return {
        **common,
        "assistant_id": params.get("assistant_id") or last_assistant,
        "command": {"resume": resume},
    }


async def admit_command(caller: Caller, thread_id: str, command: Any) -> Any:
    """A v2 command that starts a run, admitted as that run (Refused at the first problem), its
    run.start input capped at the tenant's budget; any other command (or a malformed one: Aegra
    answers it) as it came.
    """
    params = command.get("params") if isinstance(command, dict) else None
    if not isinstance(params, dict) or command.get("method") not in RUN_COMMANDS:
        return command
    method = command["method"]
    thread = await thread_facts(thread_id)
    if thread.owner is not None and not ownership.sees(caller, thread.owner, thread.user):
        raise Refused(404, f"Thread '{thread_id}' not found")
    resumes_input = False
    if method == "run.start" and params.get("input") is not None and thread.owner is not None:
        resumes_input = (
            await settled_status(thread_id, caller.tenant) == "interrupted"
        )  # Aegra's reading of it
    run = command_as_run(method, params, resumes_input, thread.last_assistant)
    admitted = await admit_run(caller, run, thread_id)
    if method == "run.start" and not resumes_input:
        params["input"] = tenant_budgets.capped(admitted.graph, params.get("input"), admitted.left)
    return command


def protocol_answer(command: Any, refused: Refused) -> Response:
    """A refused command over HTTP: the protocol's envelope (HTTP 200) for what is wrong with the
    command, the HTTP status for what is not (no key, another tenant's thread, no room: 401, 404,
    413, 429)."""
    if refused.status in (400, 409, 422):
        command_id = command.get("id") if isinstance(command, dict) else None
        return JSONResponse(refused.envelope(command_id))
    return refused.response()


class Admission:
    """The ASGI middleware (server/app.py adds it to the app Aegra serves, inside Aegra's CORS and
    request ids)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self.socket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        if path == "/metrics":
            await self.metrics(scope, receive, send)
            return
        if path in PUBLIC or method == "OPTIONS" or A2A_CARD.match(path):
            await self.app(scope, receive, send)
            return
        face = face_of(path)
        try:
            try:
                caller = authenticate(scope["headers"])
            except Unauthenticated as exc:
                raise Refused(401, str(exc)) from None
            scope[SCOPE_KEY] = caller
            if face == "graph" and (rewritten := assistant_path(path)) is not None:
                scope = {**scope, "path": rewritten, "raw_path": rewritten.encode()}
                path = rewritten
            if (
                face == "graph"
            ):  # the Agent Server's routes Aegra lacks or serves elsewhere (server/conformance.py)
                conformance.check_route(method, path)
                if (
                    elsewhere := conformance.rewritten(path, scope.get("query_string", b""))
                ) is not None:
                    path, query = elsewhere
                    scope = {
                        **scope,
                        "path": path,
                        "raw_path": path.encode(),
                        "query_string": query,
                    }
            settings = settings_mod.load()
            body = (
                await read_capped(scope["headers"], receive, settings.max_body_bytes)
                if method in BODY_METHODS
                else b""
            )
            payload = parse(body, settings.max_json_depth) if body and face != "timeline" else None
            scope[PAYLOAD_KEY] = payload
            if face == "graph":
                conformance.check_fields(
                    method, path, payload
                )  # fields Aegra would drop unread: 422 by name
            if face == "graph" and await ownership.check_path(caller, method, path, payload):
                body = json.dumps(payload).encode()  # a user's cron search, filtered to their crons
                scope = with_length(scope, len(body))
            found = route_of(method, path) if face == "graph" else None
            if found is None:
                await self.app(scope, replay(body, receive), send)
                return
            kind, params = found
            await getattr(self, kind)(scope, receive, send, caller, payload, body, **params)
        except Refused as refused:
            await refusal_response(face, refused)(scope, receive, send)

    async def forward(self, scope: Scope, receive: Receive, send: Send, payload: Any) -> None:
        body = json.dumps(payload).encode()
        await self.app(with_length(scope, len(body)), replay(body, receive), send)

    async def buffered(self, scope: Scope, receive: Receive, body: bytes) -> list[Message]:
        """Aegra's whole answer, kept to be rewritten."""
        messages: list[Message] = []

        async def keep(message: Message) -> None:
            messages.append(message)

        await self.app(with_length(scope, len(body)), replay(body, receive), keep)
        return messages

    async def run(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        payload: Any,
        body: bytes,
        thread_id: str | None = None,
    ) -> None:
        if not isinstance(payload, dict):
            await self.app(
                scope, replay(body, receive), send
            )  # Aegra answers a body that is no object (422)
            return
        check_run_start(payload)
        if thread_id is not None:
            await conformance.check_thread_exists(
                payload, thread_id
            )  # if_not_exists, as LangGraph documents it
        admitted = await admit_run(caller, payload, thread_id)
        settings = settings_mod.load()
        strategy = payload.get("multitask_strategy") or settings.multitask_strategy
        if thread_id is not None:
            payload["multitask_strategy"] = strategy
        webhook = payload.pop("webhook", None)
        if webhook is not None:
            await check_webhook(webhook, caller.tenant, settings)
        carry_trace_context(scope, payload)
        if payload.get("input") is not None:
            payload["input"] = tenant_budgets.capped(
                admitted.graph, payload["input"], admitted.left
            )
        double = DoubleText(thread_id, strategy)
        try:
            await double.act(scope["app"], scope["headers"], caller.tenant)
            if webhook is not None:
                from parallax.runtime import webhooks

                payload["metadata"] = {
                    **(payload.get("metadata") or {}),
                    webhooks.METADATA_KEY: await arm_webhook(caller.tenant, webhook),
                }

            if thread_id is not None:
                await ownership.claim_thread(thread_id, caller)

            async def send_and_release(message: Message) -> None:
                # Aegra starts answering once it has stored the run: from then on the next request
                # may look
                if message["type"] == "http.response.start":
                    await double.release()
                await send(message)

            await self.forward(scope, receive, send_and_release, payload)
        finally:
            await double.release()

    async def cron(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        payload: Any,
        body: bytes,
        thread_id: str | None = None,
        cron_id: str | None = None,
    ) -> None:
        if not isinstance(payload, dict):
            await self.app(scope, replay(body, receive), send)
            return
        if cron_id is not None and "assistant_id" not in payload:
            payload_for_checks = {
                **payload,
                "assistant_id": await self.cron_assistant(cron_id, caller),
            }
        else:
            payload_for_checks = payload
        check_strategy(payload.get("multitask_strategy"))
        await admit_run(caller, payload_for_checks, thread_id, cron=True)
        await prepare_cron(payload, caller.tenant, thread_id=thread_id, cron_id=cron_id)
        if cron_id is None or "metadata" in payload:
            payload["metadata"] = await ownership.cron_metadata(
                caller, payload.get("metadata") or {}, cron_id
            )
        if cron_id is not None:
            await self.forward(scope, receive, send, payload)
            return
        new_body = json.dumps(payload).encode()
        await answer_cron(await self.buffered(scope, receive, new_body), send, caller.tenant)

    @staticmethod
    async def cron_assistant(cron_id: str, caller: Caller) -> str | None:
        from parallax.server.connections import connection

        async with connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT assistant_id FROM crons WHERE cron_id = %s AND user_id = %s",
                    (cron_id, caller.tenant),
                )
            ).fetchone()
        return None if row is None else str(row[0])

    async def command(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        payload: Any,
        body: bytes,
        thread_id: str,
    ) -> None:
        try:
            command = await admit_command(caller, thread_id, payload)
        except Refused as refused:
            await protocol_answer(payload, refused)(scope, receive, send)
            return
        await self.forward(scope, receive, send, command)

    async def state(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        payload: Any,
        body: bytes,
        thread_id: str,
    ) -> None:
        if isinstance(payload, dict):
            check_state_update(payload, thread_id)
        await self.app(scope, replay(body, receive), send)

    async def thread(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        payload: Any,
        body: bytes,
        thread_id: str | None = None,
    ) -> None:
        if isinstance(payload, dict):
            check_metadata(payload.get("metadata"), "metadata", thread=True)
            given_id = payload.get("thread_id")
            if given_id is not None and (
                not isinstance(given_id, str) or not 0 < len(given_id) <= 128
            ):
                raise invalid(
                    "thread_id must be a string of 1 to 128 characters (a UUID)", "thread_id"
                )
        await self.app(scope, replay(body, receive), send)

    async def assistant(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        payload: Any,
        body: bytes,
        assistant_id: str | None = None,
    ) -> None:
        if isinstance(payload, dict):
            check_metadata(payload.get("metadata"), "metadata")
            if check_config(payload.get("config"), None) is not None:
                raise invalid(
                    "an assistant's config names no checkpoint: leave"
                    " config.configurable.checkpoint_id out",
                    "config.configurable.checkpoint_id",
                )
            graph = payload.get("graph_id")
            if graph is None and assistant_id is not None:
                found = await assistant_of(assistant_id, caller.tenant)
                graph = None if found is None else found.graph
            if graph in GRAPHS:
                check_context(
                    context_of(
                        payload.get("context"), configurable_settings(payload.get("config")), {}
                    )
                )
        await self.app(scope, replay(body, receive), send)

    async def run_list(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        payload: Any,
        body: bytes,
        thread_id: str,
    ) -> None:
        thread = await thread_facts(thread_id)
        if thread.owner is None or not ownership.sees(caller, thread.owner, thread.user):
            raise Refused(404, f"Thread '{thread_id}' not found")
        await self.app(scope, receive, send)

    async def cancel(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        payload: Any,
        body: bytes,
        thread_id: str,
        run_id: str,
    ) -> None:
        if b"wait=1" in scope.get("query_string", b""):
            await self.app(scope, replay(body, receive), send)
            return
        await answer_cancel(await self.buffered(scope, receive, body), send, run_id, caller.tenant)

    async def run_status_update(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        payload: Any,
        body: bytes,
        thread_id: str,
        run_id: str,
    ) -> None:
        """Aegra's `PATCH` of a run: only `status` "interrupted" does anything; unknown: 422."""
        from aegra_api.models.enums import RunStatus  # what its validate_run_status takes

        statuses = get_args(RunStatus)
        status = payload.get("status") if isinstance(payload, dict) else None
        if status not in statuses:
            raise Refused(
                422,
                f'status must be one of {", ".join(statuses)} ("interrupted" stops the run), '
                f"got {str(status)[:60]!r}",
            )
        await self.app(scope, replay(body, receive), send)

    async def metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        """/metrics: every series for the metrics key's holder; without it, none that names a
        tenant's data."""
        metrics.PENDING_RUNS.set(await pending_runs())
        key = settings_mod.load().metrics_key
        given = key_from(lowered(scope["headers"]))
        if key and given and hmac.compare_digest(key.encode(), given.encode()):
            await tenant_budgets.refresh_spend_metrics()
            await self.app(scope, receive, send)
            return
        from aegra_api.settings import settings as aegra_settings

        if not aegra_settings.observability.ENABLE_PROMETHEUS_METRICS:
            await self.app(scope, receive, send)
            return
        await metrics.public_exposition()(scope, receive, send)

    async def socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket's handshake is refused (403) without a valid key or token, or on a thread not
        the caller's, before it is accepted."""
        try:
            caller = authenticate(scope["headers"])
            await ownership.check_path(caller, "GET", scope["path"], None)
        except (Unauthenticated, Refused) as exc:
            reason = exc.message if isinstance(exc, Refused) else str(exc)
            await send({"type": "websocket.close", "code": 1008, "reason": reason[:120]})
            return
        scope[SCOPE_KEY] = caller
        await self.app(scope, receive, send)
