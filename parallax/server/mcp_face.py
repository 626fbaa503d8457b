"""/mcp on the served API: the MCP tools over Streamable HTTP, each call a run of this server.

The tools are runtime/mcp_tools.py's, as `parallax mcp` serves them over stdio. See
docs/internals/server.md#faces-that-are-runs-of-the-graph-api.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from functools import partial
from typing import Any

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.errors import RateLimitError
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from parallax.logic.run_input import check_run_input
from parallax.runtime.mcp_tools import FeedbackResult, RunResult, build_server, run_result
from parallax.server.caller import MISSING_KEY, caller_of, key_from


class ToolFailed(ToolError):
    """A run on the server failed or was refused; the message says why (the MCP client sees it)."""


def _caller(ctx: Context) -> tuple[str, str]:
    """(this replica's base URL, the caller's API key) of the MCP request."""
    request = ctx.request_context.request
    if request is None:  # only over stdio, which this backend never serves
        raise ToolFailed("not an HTTP request")
    host, port = request.scope["server"]
    key = key_from({k.lower(): v for k, v in (ctx.headers or {}).items()})
    if key is None:
        raise ToolFailed("no API key on the request")
    return f"http://{host}:{port}", key


def refusal_message(exc: httpx.HTTPStatusError) -> str:
    """The graph API's reason for refusing a request (its error JSON's message)."""
    try:
        body = exc.response.json()
    except ValueError:
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or exc.response.text or exc)


class ServerBackend:
    """Runs the tools' graphs on this server, as the caller."""

    async def _run(
        self, graph: str, run_input: dict[str, Any], ctx: Context
    ) -> tuple[dict[str, Any], str]:
        url, key = _caller(ctx)
        client = get_client(url=url, api_key=key)
        thread = None
        try:
            thread = await client.threads.create(metadata={"graph_id": graph, "via": "mcp"})
            out, run_id, failed = {}, None, False
            async for part in client.runs.stream(
                thread["thread_id"], graph, input=run_input, stream_mode="values"
            ):
                if part.event == "metadata" and isinstance(part.data, dict):
                    run_id = part.data.get("run_id", run_id)
                elif part.event == "values" and isinstance(part.data, dict):
                    out = part.data
                elif part.event == "error":
                    failed = True
        except RateLimitError as exc:
            retry = exc.response.headers.get("retry-after", "a few")
            if "daily budget reached" in refusal_message(
                exc
            ):  # server/tenant_budgets.py: says when it resets
                if thread is not None:
                    with contextlib.suppress(httpx.HTTPError):
                        await client.threads.delete(thread["thread_id"])
                raise ToolFailed(refusal_message(exc)) from None
            raise ToolFailed(
                f"the server is busy with this tenant's runs: retry after {retry} s"
            ) from None
        except httpx.HTTPStatusError as exc:
            if exc.response is None or not 400 <= exc.response.status_code < 500:
                raise
            if (
                thread is not None
            ):  # the run was refused (server/run_checks.py): leave no empty thread behind
                with contextlib.suppress(httpx.HTTPError):
                    await client.threads.delete(thread["thread_id"])
            raise ToolFailed(refusal_message(exc)) from None
        if failed:  # the stream says only "<Error>: execution failed"; the run keeps the message
            run: Mapping[str, object] = (
                await client.runs.get(thread["thread_id"], run_id) if run_id else {}
            )
            raise ToolFailed(run.get("error_message") or f"the {graph} run failed")
        return out, thread["thread_id"]

    async def solve(self, run_input: dict[str, Any], ctx: Context) -> RunResult:
        out, thread_id = await self._run("solve", run_input, ctx)
        return run_result(out, thread_id)

    async def plan(self, run_input: dict[str, Any], ctx: Context) -> RunResult:
        out, thread_id = await self._run("plan", run_input, ctx)
        return run_result(out, thread_id)

    async def feedback(
        self, trace_id: str, score: str | float, comment: str, ctx: Context
    ) -> FeedbackResult:
        out, _ = await self._run(
            "feedback", {"trace_id": trace_id, "score": score, "comment": comment, "by": "mcp"}, ctx
        )
        return FeedbackResult(
            trace_id=trace_id, score=out["score"], feedback_entries=len(out["feedback"])
        )


class McpEndpoint:
    """The ASGI endpoint of /mcp: 401 without a known key, else the SDK's Streamable HTTP
    handler."""

    def __init__(self) -> None:
        self.server = build_server(ServerBackend(), check=partial(check_run_input, served=True))
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager = self.server.session_manager
        self._ready: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def _started(self) -> None:
        if self._ready is None:
            ready = self._ready = asyncio.Event()

            async def keep_running() -> None:
                async with self.manager.run():
                    ready.set()
                    await asyncio.Event().wait()

            self._task = asyncio.create_task(keep_running())
        await self._ready.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            caller_of(scope) is None
        ):  # admission refused it already on `parallax serve`; kept for any other mount
            body = json.dumps({"error": "unauthorized", "message": MISSING_KEY}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._started()
        await self.manager.handle_request(scope, receive, send)


endpoint = McpEndpoint()
