"""The OpenAI-compatible face: `GET /v1/models` and `POST /v1/chat/completions`, each request a run.

Mounted at /v1 by both servers' HTTP apps. See docs/openai.md and
docs/internals/server.md#faces-that-are-runs-of-the-graph-api.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from parallax.runtime import settings as settings_mod
from parallax.server import json_body
from parallax.server.caller import caller_of
from parallax.server.openai_replies import ChunkWriter, completion, progress
from parallax.server.openai_request import MODELS, Refusal, RunRequest, param_of, parse
from parallax.server.refusals import Refused

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

CREATED = 1767225600  # 2026-01-01: when these model names were first served
LOOPBACK_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None)
"""No read timeout: a run takes as long as its branches do; the caller's own client decides how long
to wait."""
OPENAI_KIND = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "requests",
}
OPENAI_CODE = {
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found",
    413: "request_too_large",
    429: "rate_limit_exceeded",
}
QUOTA_KIND, QUOTA_CODE = "insufficient_quota", "daily_budget_exceeded"
"""A tenant past its daily budget: OpenAI's type for an account out of quota, and our code
(docs/openai.md)."""

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, LangGraphClient]] = (
    weakref.WeakKeyDictionary()
)
"""event loop -> {base url: langgraph-sdk client}: one connection pool per loop, no credentials in
it."""


class RunFailed(RuntimeError):
    """The run ended in error; `kind` is its exception's name (InvalidInput: the caller's input)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def self_url(request: Request) -> str:
    """This server, at the address and port the request came in on (never a URL a client named)."""
    host, port = request.scope.get("server") or ("127.0.0.1", 80)
    host = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host  # nosec B104 # a comparison
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def loopback(request: Request) -> LangGraphClient:
    return loopback_at(self_url(request))


def loopback_at(url: str) -> LangGraphClient:
    """The langgraph-sdk client of this server at `url` (one per event loop; /a2a uses it too)."""
    from langgraph_sdk import get_client

    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    if url not in per_loop:
        # api_key=None: never the server's own LANGSMITH_API_KEY & co. from the environment
        # langgraph-sdk annotates `timeout` as numbers only; it hands it to httpx, which takes a
        # Timeout
        per_loop[url] = get_client(url=url, api_key=None, timeout=LOOPBACK_TIMEOUT)  # type: ignore[arg-type]
    return per_loop[url]


def credentials(request: Request) -> dict[str, str]:
    """The caller's key, passed on as it came: the graph API's auth decides what it means; and the
    caller's W3C trace context, so the run's OpenTelemetry spans join the caller's trace
    (server/trace_context.py).
    """
    return {
        name: request.headers[name]
        for name in ("authorization", "x-api-key", "traceparent", "tracestate")
        if name in request.headers
    }


def error_response(refusal: Refusal) -> JSONResponse:
    return JSONResponse(refusal.body(), status_code=refusal.status, headers=refusal.headers)


def from_graph_api(exc: httpx.HTTPStatusError) -> Refusal:
    """A refusal of the graph API (its error JSON) in OpenAI's terms, keeping status and
    Retry-After."""
    if (
        getattr(exc, "response", None) is None
    ):  # langgraph-sdk's connection errors are HTTPStatusErrors too
        return unexpected(exc)
    status = exc.response.status_code
    try:
        body = exc.response.json()
    except ValueError:
        body = {}
    message = (
        body.get("message") or body.get("detail") if isinstance(body, dict) else None
    ) or exc.response.text
    headers = (
        {"Retry-After": exc.response.headers["retry-after"]}
        if "retry-after" in exc.response.headers
        else {}
    )
    if (
        status == 429 and isinstance(body, dict) and body.get("error") == QUOTA_KIND
    ):  # the daily budget
        return quota_refusal(str(message), headers)
    if (
        status == 422
    ):  # the graph API refused the run's input (server/run_checks.py): the caller's mistake, so 400
        details = body.get("details") if isinstance(body, dict) else None
        field = details.get("field") if isinstance(details, dict) else None
        return Refusal(str(message), param=param_of(field), code="invalid_value")
    return Refusal(
        str(message),
        status=status,
        kind=OPENAI_KIND.get(status, "server_error"),
        code=OPENAI_CODE.get(status),
        headers=headers,
    )


def quota_refusal(message: str, headers: dict[str, str]) -> Refusal:
    """A tenant past its daily budget (server/tenant_budgets.py), as OpenAI answers an account out
    of quota."""
    return Refusal(message, status=429, kind=QUOTA_KIND, code=QUOTA_CODE, headers=headers)


async def budget_refused(request: Request) -> JSONResponse | None:
    """The 429 of a tenant past its daily budget, before any thread is created; None under it, or
    without budgets (the graph API checks again, and caps the run). Imported here, not at the top:
    /v1 is mounted under langgraph dev too, which has no budgets and no server extra."""
    from parallax.server.tenant_budgets import refusal

    caller = caller_of(request.scope)
    refused = await refusal(None if caller is None else caller.tenant, "openai")
    if refused is None:
        return None
    return error_response(openai_refusal(refused))


def openai_refusal(refused: Refused) -> Refusal:
    """A refusal of the served API (server/refusals.py) in OpenAI's terms, keeping status and
    headers."""
    if refused.kind == QUOTA_KIND:
        return quota_refusal(refused.message, refused.headers)
    if refused.status == 422:
        return Refusal(refused.message, param=param_of(refused.field), code="invalid_value")
    return Refusal(
        refused.message,
        status=refused.status,
        kind=OPENAI_KIND.get(refused.status, "server_error"),
        code=OPENAI_CODE.get(refused.status),
        headers=refused.headers,
    )


def unexpected(exc: BaseException) -> Refusal:
    return Refusal(
        f"the run could not be started or followed: {type(exc).__name__}: {exc}",
        status=502,
        kind="server_error",
    )


async def key_refused(request: Request) -> JSONResponse | None:
    """The graph API's own key check (a cheap authenticated call), so the models are listed to no
    unknown key."""
    try:
        await loopback(request).assistants.search(limit=1, headers=credentials(request))
    except httpx.HTTPStatusError as exc:
        return error_response(from_graph_api(exc))
    except (httpx.HTTPError, OSError) as exc:
        return error_response(unexpected(exc))
    return None


async def list_models(request: Request) -> JSONResponse:
    if refused := await key_refused(request):
        return refused
    return JSONResponse({"object": "list", "data": [model_card(name) for name in MODELS]})


async def get_model(request: Request) -> JSONResponse:
    if refused := await key_refused(request):
        return refused
    model = request.path_params["model"]
    if model not in MODELS:
        return error_response(
            Refusal(
                f"The model `{model}` does not exist: use one of {', '.join(MODELS)}",
                status=404,
                param="model",
                code="model_not_found",
            )
        )
    return JSONResponse(model_card(model))


def model_card(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": "parallax"}


async def chat_completions(request: Request) -> Response:
    if json_body.PAYLOAD_KEY in request.scope:  # parsed by admission (parallax serve)
        body = request.scope[json_body.PAYLOAD_KEY]
    else:
        try:
            body = json_body.parse(await request.body(), settings_mod.load().max_json_depth)
        except Refused as bad_body:
            return error_response(openai_refusal(bad_body))
    try:
        asked = parse(body)
    except Refusal as refusal:
        return error_response(refusal)
    if "DATABASE_URL" in os.environ and (refused := await budget_refused(request)):
        return refused
    return RunReply(asked, loopback(request), credentials(request))


class RunReply(Response):
    """Starts the run, then answers with one JSON reply or an event stream.

    One ASGI call does both, so the status line is sent only once the run was accepted (a 401
    or 429 of the graph API is still the reply's status), and the loopback stream is opened
    and read in one task."""

    def __init__(self, asked: RunRequest, client: Any, headers: dict[str, str]) -> None:
        super().__init__()
        self.asked, self.client, self.caller = asked, client, headers

    async def events(self) -> AsyncGenerator[Any, None]:
        thread = await self.client.threads.create(
            metadata={"graph_id": self.asked.graph, "face": "openai", "model": self.asked.model},
            headers=self.caller,
        )
        self.thread_id = thread["thread_id"]
        modes = ["updates", "values"] if self.asked.stream else ["values"]
        parts = self.client.runs.stream(
            self.thread_id,
            self.asked.graph,
            input=self.asked.input,
            context=self.asked.context or None,
            stream_mode=modes,
            on_disconnect="continue",
            headers=self.caller,
        )
        try:
            first = await anext(parts, None)
        except httpx.HTTPStatusError:  # the run was refused (429): leave no empty thread behind
            with contextlib.suppress(httpx.HTTPError, OSError):
                await self.client.threads.delete(self.thread_id, headers=self.caller)
            raise
        if first is None:
            return
        yield first
        async for part in parts:
            yield part

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.created = int(time.time())
        self.thread_id = self.run_id = ""
        events = self.events()
        try:
            try:
                self.run_id = await self.started(events)
            except httpx.HTTPStatusError as exc:
                refused = from_graph_api(exc)
                return await send_json(send, refused.body(), refused.status, refused.headers)
            except (httpx.HTTPError, OSError, LookupError) as exc:
                return await send_json(send, unexpected(exc).body(), 502)
            if self.asked.stream:
                await self.stream(events, send)
            else:
                await self.reply(events, send)
        finally:
            await events.aclose()

    async def started(self, events: AsyncIterator[Any]) -> str:
        """The run's id: from its first event (`metadata`), else, when the stream ended before
        naming it, from the thread's runs (the thread is new: its one run is this one)."""
        async for part in events:
            if part.event == "metadata" and isinstance(part.data, dict) and part.data.get("run_id"):
                return str(part.data["run_id"])
        if not self.thread_id:
            raise LookupError("no thread was created")
        runs = await self.client.runs.list(self.thread_id, limit=1, headers=self.caller)
        if not runs:
            raise LookupError(f"thread {self.thread_id} has no run")
        return str(runs[0]["run_id"])

    async def follow(
        self, events: AsyncIterator[Any], on_update: Callable[[Any], Awaitable[None]] | None = None
    ) -> dict[str, Any]:
        """The run's last state, or RuntimeError with the run's own error message.

        A stream that closes without Aegra's `end` event is not trusted to carry the final state
        (langgraph dev sends none; under load, Aegra's stream of a run on another replica can close
        early): the run is then joined and its state read from the thread."""
        state: dict[str, Any] = {}
        ended = False
        async for part in events:
            if part.event == "values" and isinstance(part.data, dict):
                state = part.data
            elif part.event == "updates" and on_update is not None:
                await on_update(part.data)
            elif part.event == "error":
                data = part.data if isinstance(part.data, dict) else {"message": str(part.data)}
                raise RunFailed(str(data.get("error") or "error"), str(data.get("message") or data))
            elif part.event == "end":
                ended = True
        if state and ended:
            return state
        await self.client.runs.join(self.thread_id, self.run_id, headers=self.caller)
        run = await self.client.runs.get(self.thread_id, self.run_id, headers=self.caller)
        if run.get("status") != "success":
            raise RuntimeError(f"the run ended with status {run.get('status')!r}")
        return (await self.client.threads.get_state(self.thread_id, headers=self.caller)).get(
            "values"
        ) or {}

    def failure(self, exc: BaseException | str) -> str:
        return f"the run failed (thread {self.thread_id}, run {self.run_id}): {exc}"

    async def reason(self, failed: RunFailed) -> str:
        """The run's own error message (its row keeps it; the stream says only "<Error>: execution
        failed")."""
        with contextlib.suppress(httpx.HTTPError, OSError):
            run = await self.client.runs.get(self.thread_id, self.run_id, headers=self.caller)
            return str(run.get("error_message") or failed)
        return str(failed)

    async def reply(self, events: AsyncIterator[Any], send: Send) -> None:
        try:
            state = await self.follow(events)
        except RunFailed as exc:
            if (
                exc.kind == "InvalidInput"
            ):  # bad input only the run could see (a document): 400, not a retried 500
                refused = Refusal(
                    self.failure(await self.reason(exc)), param="messages", code="invalid_value"
                )
                return await send_json(send, refused.body(), 400)
            return await send_json(
                send, Refusal(self.failure(exc), status=500, kind="server_error").body(), 500
            )
        except (RuntimeError, httpx.HTTPError, OSError) as exc:
            return await send_json(
                send, Refusal(self.failure(exc), status=500, kind="server_error").body(), 500
            )
        await send_json(
            send,
            completion(
                state,
                model=self.asked.model,
                run_id=self.run_id,
                thread_id=self.thread_id,
                created=self.created,
                typed=self.asked.typed,
            ),
            200,
        )

    async def stream(self, events: AsyncIterator[Any], send: Send) -> None:
        writer = ChunkWriter(
            model=self.asked.model,
            run_id=self.run_id,
            thread_id=self.thread_id,
            created=self.created,
            include_usage=self.asked.include_usage,
        )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )

        async def write(text: str) -> None:
            await send({"type": "http.response.body", "body": text.encode(), "more_body": True})

        async def thinking(update: Any) -> None:
            for line in progress(update):
                await write(writer.delta(reasoning_content=line + "\n"))

        await write(writer.start())
        try:
            state = await self.follow(events, thinking)
            for text in writer.finish(state, self.asked.typed):
                await write(text)
        except (RuntimeError, httpx.HTTPError, OSError) as exc:
            await write(writer.error(self.failure(exc)))
        await send(
            {"type": "http.response.body", "body": writer.done().encode(), "more_body": False}
        )


NOT_SERVED = {
    "/completions": "legacy completions",
    "/embeddings": "embeddings",
    "/responses": "the Responses API",
}
"""OpenAI paths a client may try: each answers 404 saying what is served instead."""


async def unknown_path(request: Request, exc: Exception) -> JSONResponse:
    """Any other path or method under /v1: OpenAI's error JSON, never Starlette's plain-text "Not
    Found"."""
    path = request.url.path
    path = path[len("/v1") :] if path.startswith("/v1/") else path
    served = "GET /v1/models, GET /v1/models/{model} and POST /v1/chat/completions"
    if getattr(exc, "status_code", 404) == 405:
        return error_response(
            Refusal(
                f"{request.method} /v1{path} is not allowed: this face serves {served}",
                status=405,
                code="method_not_allowed",
            )
        )
    what = next((name for prefix, name in NOT_SERVED.items() if path.startswith(prefix)), None)
    message = (
        f"Parallax does not serve {what} (/v1{path}): use POST /v1/chat/completions"
        if what
        else f"Unknown path /v1{path}: this face serves {served}"
    )
    return error_response(Refusal(message, status=404, code="unknown_url"))


app = Starlette(
    routes=[
        Route("/models", list_models, methods=["GET"]),
        Route("/models/{model}", get_model, methods=["GET"]),
        Route("/chat/completions", chat_completions, methods=["POST"]),
    ],
    exception_handlers={404: unknown_path, 405: unknown_path},
)
"""Mounted at /v1 by both servers' apps."""


async def send_json(
    send: Send, body: dict[str, Any], status: int, headers: dict[str, str] | None = None
) -> None:
    raw = json.dumps(body, ensure_ascii=False).encode()
    extra = [(k.lower().encode(), str(v).encode()) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})
