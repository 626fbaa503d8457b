"""/a2a/{assistant_id}: the solve and plan assistants over the Agent2Agent protocol (a2a-sdk).

Each message is a run made through this server's own graph API, so it is checked, budgeted and
kept like any run. See docs/a2a.md and
docs/internals/server.md#faces-that-are-runs-of-the-graph-api.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from a2a.auth.user import User
from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    CancelTaskRequest,
    HTTPAuthSecurityScheme,
    InvalidParamsError,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from parallax.logic.run_input import RunInputError, check_run_input
from parallax.server.caller import MISSING_KEY, Caller, caller_of
from parallax.server.json_body import PAYLOAD_KEY
from parallax.server.openai_face import credentials, loopback_at, self_url
from parallax.server.openai_replies import progress, report
from parallax.server.refusals import Refused

log = logging.getLogger(__name__)

VERSION = "1.0"
SEND_METHODS = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})
"""The JSON-RPC methods that start a run (A2A 1.0's names and 0.3's)."""
URL_KEY, CREDENTIALS_KEY = "parallax.self_url", "parallax.credentials"
"""Where the call context keeps this server's address and the caller's key and trace headers, for
the loopback run."""
TASK_METADATA = "a2a_task_id"
"""The thread metadata that names the A2A task whose run the thread holds (how CancelTask finds the
run)."""
JSONRPC_CODES = {400: -32700, 422: -32602}
"""A refusal's JSON-RPC error code by HTTP status (not JSON: parse error; a bad field: invalid
params); any other refusal is an invalid request (-32600), its HTTP status kept."""
SCHEMA = "a2a"
"""The PostgreSQL schema of the SDK's task tables (tasks, task_versions, task_events), apart from
Aegra's."""

SKILLS: dict[str, list[AgentSkill]] = {
    "solve": [
        AgentSkill(
            id="vote",
            name="Answer by vote",
            description=(
                "Asks the model several times and merges the answers by vote; the reply says how "
                "sure it is and how the votes fell."
            ),
            tags=["question answering", "self-consistency"],
            examples=["What is 6 * 7?"],
        ),
        AgentSkill(
            id="extract",
            name="Extract structured data",
            description=(
                'Fills a JSON Schema you send (data part: {"output_schema": {...}}) from the task '
                "text or a document, field by field by vote."
            ),
            tags=["extraction", "json schema"],
            examples=["Vendor, total and paid status of this invoice: ..."],
        ),
        AgentSkill(
            id="document",
            name="Read a document",
            description=(
                "Answers about a PDF, DOCX, HTML or text document (data part: "
                '{"document": {"name": ..., "base64": ...}, "question": ...}), its findings '
                "quoted and checked against the text."
            ),
            tags=["documents", "citations"],
            examples=["What revenue does this filing report?"],
        ),
    ],
    "plan": [
        AgentSkill(
            id="plan",
            name="Plan and run a multi-step task",
            description=(
                "Plans the task as steps, runs each (in parallel where they do not depend on "
                "each other), checks them and joins their results; replans when a step fails."
            ),
            tags=["planning", "multi-step"],
            examples=[
                "Compare the two offers below and recommend one, with the numbers behind it."
            ],
        ),
    ],
}
DESCRIPTIONS = {
    "solve": (
        "Parallax solve: answers a task by running the model several ways at once (vote, sections, "
        "speculation) and merging what agrees, with its confidence, a trace and the run's spend."
    ),
    "plan": (
        "Parallax plan: splits a task into steps, runs them in parallel where it can, checks and"
        " joins them, with a trace and the run's spend."
    ),
}
ASSISTANTS = tuple(SKILLS)
"""The assistants served over A2A: the graphs a message can ask something of and get an answer from.
"""


def agent_card(graph: str, url: str) -> AgentCard:
    """The agent card of `graph` served at `url` (the JSON-RPC endpoint, A2A 1.0 and 0.3)."""
    return AgentCard(
        name=f"parallax-{graph}",
        description=DESCRIPTIONS[graph],
        version="1.0.0",
        provider=AgentProvider(organization="Parallax", url=url.split("/a2a/", 1)[0]),
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=VERSION),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer", description="the API key of your tenant (PARALLAX_API_KEYS)"
                )
            ),
            "apiKey": SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header",
                    name="x-api-key",
                    description="the same key, as a header of its own",
                )
            ),
        },
        security_requirements=[
            SecurityRequirement(schemes={"bearer": StringList()}),
            SecurityRequirement(schemes={"apiKey": StringList()}),
        ],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=SKILLS[graph],
    )


def run_input(graph: str, message: Message | None) -> dict[str, Any]:
    """The run's input from a message (its text parts the task, its data parts the graph's input
    fields), checked in full against the graph's definition; InvalidParamsError naming what is
    wrong."""
    if message is None:
        raise InvalidParamsError(message="no message: send one with a text part (the task)")
    given: dict[str, Any] = {}
    for data in map(whole_numbers, get_data_parts(message.parts)):
        if not isinstance(data, dict):
            raise InvalidParamsError(
                message=(
                    f"a data part must be an object of {graph}'s input fields (docs/limits.md), not"
                    f" {type(data).__name__}"
                )
            )
        given.update(data)
    if any(part.HasField("raw") or part.HasField("url") for part in message.parts):
        raise InvalidParamsError(
            message=(
                "file parts are not read: send a document as a data part "
                '{"document": {"name": "report.pdf", "base64": "..."}}'
            )
        )
    text = "\n".join(part.text for part in message.parts if part.HasField("text")).strip()
    if text:
        given.setdefault("task", text)
    if not given:
        raise InvalidParamsError(
            message="the message has no text and no data: send the task as a text part"
        )
    try:
        check_run_input(graph, given, None, served=True)
    except RunInputError as exc:
        raise InvalidParamsError(message=str(exc), data={"field": exc.field}) from None
    return given


def whole_numbers(value: Any) -> Any:
    """A data part's value with its whole numbers as int: a data part is a protobuf Struct, whose
    numbers are all doubles, and `votes: 3.0` is not the 3 the graph's input asks for."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


class TenantUser(User):
    """The caller admission resolved, as the SDK's user: the task store keeps each task under its
    tenant."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.caller.identity


def owner_of(context: ServerCallContext) -> str:
    """A task's owner: the caller's identity (never the request's own `tenant` field, which the
    client writes)."""
    user = context.user
    if not isinstance(user, TenantUser):
        raise InvalidParamsError(message=MISSING_KEY)
    return user.user_name


class CallContexts(DefaultServerCallContextBuilder):
    """The SDK's call context, with the caller and what the loopback run needs: this server's
    address, the caller's key and trace context."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[URL_KEY] = self_url(request)
        context.state[CREDENTIALS_KEY] = credentials(request)
        return context

    def build_user(self, request: Request) -> User:
        caller = caller_of(request.scope)
        if caller is None:  # admission answered 401 already on `parallax serve`
            raise InvalidParamsError(message=MISSING_KEY)
        return TenantUser(caller)


class RunFailed(RuntimeError):
    """The run ended without an answer; the message says why."""


class RunAgent(AgentExecutor):
    """Runs one graph for a task: a thread and a run on this server's graph API, followed to their
    end."""

    def __init__(self, graph: str) -> None:
        self.graph = graph
        self.cancelled: set[str] = set()
        """Tasks this replica cancelled: their run's end is no news (the task is canceled already).
        """

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = (
                new_task_from_user_message(context.message)
                if context.message is not None
                else Task()
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        state = context.call_context.state
        client, headers = loopback_at(state[URL_KEY]), state[CREDENTIALS_KEY]
        try:
            values, thread_id, run_id = await self.follow(
                client, headers, task, run_input(self.graph, context.message), updater
            )
        except RunFailed as failed:
            if task.id not in self.cancelled:
                await updater.failed(updater.new_agent_message([new_text_part(str(failed))]))
            return
        if task.id in self.cancelled:
            return
        answer, facts = values.get("answer") or "", report(values, thread_id, run_id)
        if isinstance(values.get("data"), dict):
            facts["data"] = values["data"]
        if not answer and not isinstance(values.get("data"), dict):
            why = values.get("reason") or "the run settled on no answer"
            await updater.failed(
                updater.new_agent_message(
                    [
                        new_text_part(f"Parallax run {values.get('status') or 'failed'}: {why}"),
                        new_data_part(facts),
                    ]
                )
            )
            return
        await updater.add_artifact(
            [
                new_text_part(answer or json.dumps(values["data"], ensure_ascii=False)),
                new_data_part(facts),
            ],
            name="answer",
            last_chunk=True,
        )
        await updater.complete()

    async def follow(
        self,
        client: Any,
        headers: dict[str, str],
        task: Task,
        given: dict[str, Any],
        updater: TaskUpdater,
    ) -> tuple[dict[str, Any], str, str]:
        """(the run's last state, thread id, run id); RunFailed when it was refused or failed."""
        try:
            thread = await client.threads.create(
                metadata={
                    "graph_id": self.graph,
                    "face": "a2a",
                    TASK_METADATA: task.id,
                    "a2a_context_id": task.context_id,
                },
                headers=headers,
            )
        except httpx.HTTPStatusError as exc:
            raise RunFailed(refusal_text(exc)) from None
        thread_id, run_id, values, ended = thread["thread_id"], "", {}, False
        parts = client.runs.stream(
            thread_id,
            self.graph,
            input=given,
            stream_mode=["updates", "values"],
            on_disconnect="continue",
            headers=headers,
        )
        try:
            async for part in parts:
                if (
                    part.event == "metadata"
                    and isinstance(part.data, dict)
                    and part.data.get("run_id")
                ):
                    run_id = str(part.data["run_id"])
                    await updater.start_work(
                        updater.new_agent_message(
                            [
                                new_text_part(
                                    f"{self.graph} run {run_id} started on thread {thread_id}"
                                )
                            ],
                            metadata={"thread_id": thread_id, "run_id": run_id},
                        )
                    )
                elif part.event == "updates":
                    for line in progress(part.data):
                        await updater.start_work(updater.new_agent_message([new_text_part(line)]))
                elif part.event == "values" and isinstance(part.data, dict):
                    values = part.data
                elif part.event == "error":
                    data = part.data if isinstance(part.data, dict) else {"message": str(part.data)}
                    raise RunFailed(await run_error(client, headers, thread_id, run_id, data))
                elif part.event == "end":
                    ended = True
        except (
            httpx.HTTPStatusError
        ) as exc:  # refused by the graph API (429, 422): leave no empty thread behind
            with contextlib.suppress(httpx.HTTPError, OSError):
                await client.threads.delete(thread_id, headers=headers)
            raise RunFailed(refusal_text(exc)) from None
        finally:
            await parts.aclose()
        if (
            not (values and ended) and run_id
        ):  # the stream closed early: the run's end, read back (as /v1 does)
            await client.runs.join(thread_id, run_id, headers=headers)
            run = await client.runs.get(thread_id, run_id, headers=headers)
            if run.get("status") != "success":
                raise RunFailed(
                    f"the {self.graph} run {run_id} ended with status {run.get('status')!r}"
                )
            values = (await client.threads.get_state(thread_id, headers=headers)).get(
                "values"
            ) or {}
        return values, thread_id, run_id

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The task canceled (its run is cancelled by the handler, which also serves a task run on
        another replica)."""
        task_id = context.task_id or ""
        self.cancelled.add(task_id)
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        await updater.cancel(updater.new_agent_message([new_text_part("canceled by the caller")]))


async def run_error(
    client: Any, headers: dict[str, str], thread_id: str, run_id: str, data: dict[str, Any]
) -> str:
    """The run's own error message (its row keeps it; the stream says only "<Error>: execution
    failed")."""
    with contextlib.suppress(httpx.HTTPError, OSError):
        if run_id:
            run = await client.runs.get(thread_id, run_id, headers=headers)
            if run.get("error_message"):
                return f"the run failed: {run['error_message']}"
    return f"the run failed: {data.get('error') or 'error'}: {data.get('message') or data}"


def refusal_text(exc: httpx.HTTPStatusError) -> str:
    """The graph API's reason for refusing a request (its error JSON's message), with its status."""
    try:
        body = exc.response.json()
    except ValueError:
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    return f"refused ({exc.response.status_code}): {message or exc.response.text or exc}"


async def cancel_runs(context: ServerCallContext, task_id: str) -> None:
    """Cancel the runs of the task's thread that are still pending or running, as the caller."""
    client, headers = loopback_at(context.state[URL_KEY]), context.state[CREDENTIALS_KEY]
    try:
        threads = await client.threads.search(
            metadata={TASK_METADATA: task_id}, limit=2, headers=headers
        )
        for thread in threads:
            for run in await client.runs.list(thread["thread_id"], limit=10, headers=headers):
                if run.get("status") in ("pending", "running"):
                    await client.runs.cancel(thread["thread_id"], run["run_id"], headers=headers)
    except (
        httpx.HTTPError,
        OSError,
    ) as exc:  # the task is canceled; a run left behind ends on its own budget
        log.warning("a2a: cancelling the run of task %s failed: %s", task_id, exc)


class Handler(DefaultRequestHandlerV2):
    """The SDK's request handler, with the message's input checked before a task exists and a cancel
    that cancels the task's run."""

    def __init__(self, graph: str, store: Any, events: Any) -> None:
        super().__init__(
            agent_executor=RunAgent(graph),
            task_store=store,
            event_stream=events,
            agent_card=agent_card(graph, f"/a2a/{graph}"),
        )
        self.graph = graph

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        run_input(self.graph, params.message)
        return await super().on_message_send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        run_input(self.graph, params.message)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        task = await super().on_cancel_task(params, context)
        await cancel_runs(context, params.id)
        return task


def database_url() -> str:
    """DATABASE_URL as SQLAlchemy's asyncpg URL (the SDK's task store is SQLAlchemy's)."""
    from sqlalchemy.engine import make_url

    url = make_url(os.environ["DATABASE_URL"])
    return str(url.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False))


class Face:
    """The ASGI app mounted at /a2a: one JSON-RPC dispatcher per assistant, made at the first
    request (the task store's engine belongs to the server's event loop)."""

    def __init__(self) -> None:
        self.dispatchers: dict[str, JsonRpcDispatcher] = {}
        self.ready = asyncio.Lock()
        self.app = Starlette(
            routes=[
                Route("/{assistant_id}/.well-known/agent-card.json", self.card, methods=["GET"]),
                Route("/{assistant_id}", self.rpc, methods=["POST"]),
                Route("/{assistant_id}/", self.rpc, methods=["POST"]),
            ],
            exception_handlers={404: unknown_path, 405: unknown_path},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    async def started(self) -> dict[str, JsonRpcDispatcher]:
        async with self.ready:
            if not self.dispatchers:
                from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
                from sqlalchemy import text
                from sqlalchemy.ext.asyncio import create_async_engine

                # the SDK's default table names, in a schema of their own (its store and event
                # stream share the event table's model only under the default name)
                engine = create_async_engine(
                    database_url(),
                    pool_size=2,
                    max_overflow=4,
                    pool_pre_ping=True,
                    connect_args={"server_settings": {"search_path": SCHEMA}},
                )
                store = VersionedDatabaseTaskStore(engine, owner_resolver=owner_of)
                events = DatabaseTaskEventStream(engine)
                for attempt in range(
                    3
                ):  # replicas starting at once race to create the tables: the loser looks again
                    try:
                        async with engine.begin() as conn:
                            await conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
                        await store.initialize()
                        await events.initialize()
                        break
                    except Exception:
                        if attempt == 2:
                            raise
                        await asyncio.sleep(0.5)
                contexts = CallContexts()
                self.dispatchers = {
                    graph: JsonRpcDispatcher(
                        Handler(graph, store, events), contexts, enable_v0_3_compat=True
                    )
                    for graph in ASSISTANTS
                }
        return self.dispatchers

    async def card(self, request: Request) -> Response:
        graph = request.path_params["assistant_id"]
        if graph not in SKILLS:
            return unknown_assistant(graph)
        url = str(request.url).split("?", 1)[0].removesuffix("/.well-known/agent-card.json")
        return JSONResponse(agent_card_to_dict(agent_card(graph, url)))

    async def rpc(self, request: Request) -> Response:
        graph = request.path_params["assistant_id"]
        if graph not in SKILLS:
            return unknown_assistant(graph)
        caller = caller_of(request.scope)
        if caller is None:
            return refusal_response(Refused(401, MISSING_KEY))
        payload = request.scope.get(PAYLOAD_KEY)
        if (
            isinstance(payload, dict)
            and payload.get("method") in SEND_METHODS
            and (refused := await room_for(caller))
        ):
            return refusal_response(refused, payload.get("id"))
        answer: Response = await (await self.started())[graph].handle_requests(request)
        return answer


async def room_for(caller: Caller) -> Refused | None:
    """The 429 of a tenant at its backpressure limit or past its daily budget, before a task exists
    (the graph API asks again when the run is created, and that answer holds)."""
    from parallax.server import tenant_budgets
    from parallax.server.auth import backpressure

    return await backpressure(caller) or await tenant_budgets.refusal(caller.tenant, "a2a")


def refusal_response(refused: Refused, request_id: Any = None) -> JSONResponse:
    """A refusal as a JSON-RPC error, its HTTP status (and Retry-After) kept: what A2A clients
    read."""
    error = {
        "code": JSONRPC_CODES.get(refused.status, -32600),
        "message": refused.message,
        "data": {
            "status": refused.status,
            "error": refused.kind,
            **({"field": refused.field} if refused.field else {}),
            **refused.details,
        },
    }
    headers = {
        **refused.headers,
        **({"WWW-Authenticate": "Bearer"} if refused.status == 401 else {}),
    }
    return JSONResponse(
        {"jsonrpc": "2.0", "id": request_id, "error": error},
        status_code=refused.status,
        headers=headers,
    )


def unknown_assistant(graph: str) -> JSONResponse:
    return refusal_response(
        Refused(
            404,
            f"no assistant {graph!r} over A2A: this server serves"
            f" {', '.join(f'/a2a/{name}' for name in ASSISTANTS)}",
        )
    )


async def unknown_path(request: Request, exc: Exception) -> Response:
    served = ", ".join(
        f"POST /a2a/{name} and GET /a2a/{name}/.well-known/agent-card.json" for name in ASSISTANTS
    )
    status = getattr(exc, "status_code", 404)
    return refusal_response(
        Refused(status, f"{request.method} {request.url.path} is not served: A2A is at {served}")
    )


app = Face()
"""Mounted at /a2a by `parallax serve` (server/app.py)."""
