"""Twenty-odd client mistakes, made with each face's official client against a running deployment,
one table row each.

Why: a client's mistake must come back as a client error in that face's shape, with the real
reason, and must neither create a run nor provoke a retry (issue 31, item 3). Each row is made
with the client a user would use: the openai SDK with its default retries (2: a 5xx or a
connection error is sent again), the MCP SDK's Streamable HTTP client, langgraph-sdk. The row
records what the client saw (status, error shape, the `param` or reason), the requests the client
actually sent (an httpx event hook on its own HTTP client: a retry would show as 2 or 3), and
what the deployment stored meanwhile (rows of its runs and thread tables, counted before and after).

Used by tests/integration/test_deploy_mistakes.py (asserts every row) and bench/client_mistakes.py
(prints the table as JSON).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

TENANT, KEY, OTHER_TENANT, OTHER_KEY = "acme", "key-acme", "beta", "key-beta"
ASK = [{"role": "user", "content": "What is 6 * 7?"}]
OPENAI_SHAPE = "openai"  # {"error": {"message", "type", "param", "code"}}
MCP_SHAPE = "mcp tool error"  # a tools/call result with isError and the reason as its text
GRAPH_SHAPE = "agent protocol"  # {"error", "message", "details"}


@dataclass
class Row:
    face: str
    mistake: str
    status: int | None
    """HTTP status (for /mcp the tools/call's, whose result carries the error)."""
    shape: str
    where: str
    """The field the error names (OpenAI `param`, the graph API's details.field; for MCP, a field
    the text names)."""
    message: str
    runs_created: int
    threads_left: int
    requests_sent: int


class Counter:
    """An httpx(2) request hook: how many requests a client sent (only those whose body has
    `needle`, when given)."""

    def __init__(self, needle: bytes = b"") -> None:
        self.needle, self.sent = needle, 0

    async def __call__(self, request: Any) -> None:
        if not self.needle or self.needle in (request.content or b""):
            self.sent += 1


def table_counts(database_url: str) -> tuple[int, int]:
    import psycopg

    with psycopg.connect(database_url) as conn:
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        threads = conn.execute("SELECT count(*) FROM thread").fetchone()[0]
    return runs, threads


def openai_error(exc: Any) -> tuple[int | None, str, str, str]:
    body = getattr(exc, "body", None)
    status = getattr(exc, "status_code", None)
    if isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}:
        return status, OPENAI_SHAPE, str(body["param"]), str(body["message"])
    return status, f"other: {type(exc).__name__}", "", str(exc)[:200]


def graph_error(exc: Any) -> tuple[int | None, str, str, str]:
    response = getattr(exc, "response", None)
    try:
        body = response.json() if response is not None else None
    except ValueError:
        body = None
    if isinstance(body, dict) and {"error", "message", "details"} <= set(body):
        field = (body["details"] or {}).get("field") if isinstance(body["details"], dict) else None
        return response.status_code, GRAPH_SHAPE, str(field or ""), str(body["message"])
    return (
        getattr(response, "status_code", None),
        f"other: {type(exc).__name__}",
        "",
        str(exc)[:200],
    )


async def make_mistakes(
    url: str, database_url: str, seed_thread_of_other: Callable[[], Awaitable[str]]
) -> list[Row]:
    """Every mistake once, against the replica at `url`; `seed_thread_of_other()` makes a thread of
    OTHER_TENANT."""
    import httpx
    import httpx2
    import openai
    from langgraph_sdk import get_client
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    rows: list[Row] = []
    other_thread = await seed_thread_of_other()

    async def row(
        face: str,
        mistake: str,
        attempt: Callable[[Counter], Awaitable[tuple[int | None, str, str, str]]],
        needle: bytes = b"",
    ) -> None:
        before = table_counts(database_url)
        counter = Counter(needle)
        status, shape, where, message = await attempt(counter)
        after = table_counts(database_url)
        rows.append(
            Row(
                face,
                mistake,
                status,
                shape,
                where,
                message[:240],
                after[0] - before[0],
                after[1] - before[1],
                counter.sent,
            )
        )

    def oa(counter: Counter, key: str = KEY) -> openai.AsyncOpenAI:  # the SDK's default retries: 2
        return openai.AsyncOpenAI(
            base_url=f"{url}/v1",
            api_key=key,
            http_client=httpx.AsyncClient(event_hooks={"request": [counter]}, timeout=120),
        )

    def chat(**fields: Any) -> Callable[[Counter], Awaitable[tuple[int | None, str, str, str]]]:
        async def attempt(counter: Counter) -> tuple[int | None, str, str, str]:
            request = {"model": "parallax-vote", "messages": ASK, **fields}
            try:
                reply = await oa(counter).chat.completions.create(**request)
                if request.get("stream"):
                    async for _ in reply:
                        pass
            except openai.APIStatusError as exc:
                return openai_error(exc)
            return 200, "accepted", "", "no error"

        return attempt

    def call(
        make: Callable[[openai.AsyncOpenAI], Awaitable[Any]], key: str = KEY
    ) -> Callable[[Counter], Awaitable[tuple[int | None, str, str, str]]]:
        async def attempt(counter: Counter) -> tuple[int | None, str, str, str]:
            try:
                await make(oa(counter, key))
            except openai.APIStatusError as exc:
                return openai_error(exc)
            return 200, "accepted", "", "no error"

        return attempt

    await row(
        "/v1",
        "unknown playbook (extra_body parallax.playbook)",
        chat(extra_body={"parallax": {"playbook": "nope"}}),
    )
    await row(
        "/v1",
        "unknown playbook, streaming",
        chat(stream=True, extra_body={"parallax": {"playbook": "nope"}}),
    )
    await row(
        "/v1",
        "context max_concurrency -3",
        chat(extra_body={"parallax": {"context": {"max_concurrency": -3}}}),
    )
    await row("/v1", "votes 0", chat(extra_body={"parallax": {"votes": 0}}))
    await row("/v1", "unknown parallax option (votez)", chat(extra_body={"parallax": {"votez": 3}}))
    await row("/v1", "unknown top-level field (frobnicate)", chat(extra_body={"frobnicate": 1}))
    await row("/v1", "no model", chat(model=openai.NOT_GIVEN))
    await row("/v1", "unknown model", chat(model="gpt-4o"))
    await row(
        "/v1",
        "response_format schema not an object",
        chat(
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "string"}},
            }
        ),
    )
    await row("/v1", "n = 2", chat(n=2))
    await row(
        "/v1",
        "POST /v1/embeddings",
        call(lambda c: c.embeddings.create(model="parallax-vote", input="x")),
    )
    await row(
        "/v1",
        "POST /v1/responses",
        call(lambda c: c.responses.create(model="parallax-vote", input="x")),
    )
    await row(
        "/v1",
        "POST /v1/completions",
        call(lambda c: c.completions.create(model="parallax-vote", prompt="x")),
    )
    await row(
        "/v1",
        "unknown API key",
        call(
            lambda c: c.chat.completions.create(model="parallax-vote", messages=ASK),
            key="not-a-key",
        ),
    )

    def tool(
        arguments: dict[str, Any],
    ) -> Callable[[Counter], Awaitable[tuple[int | None, str, str, str]]]:
        async def attempt(counter: Counter) -> tuple[int | None, str, str, str]:
            statuses: list[int] = []

            async def status_of(response: Any) -> None:
                if b"tools/call" in (response.request.content or b""):
                    statuses.append(response.status_code)

            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {KEY}"},
                timeout=120,
                event_hooks={"request": [counter], "response": [status_of]},
            )
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as mcp:
                result = await mcp.call_tool("solve", arguments)
            text = result.content[0].text if result.content else ""
            named = next(
                (name for name in ("votes", "vote", "output_schema", "playbook") if name in text),
                "",
            )
            shape = MCP_SHAPE if result.is_error else "accepted"
            return (statuses[-1] if statuses else None), shape, named, text

        return attempt

    await row(
        "/mcp",
        "solve votes -1",
        tool({"task": "What is 6 * 7?", "mode": "vote", "votes": -1}),
        b"tools/call",
    )
    await row(
        "/mcp",
        "solve output_schema not an object",
        tool({"task": "What is 6 * 7?", "output_schema": {"type": "string"}}),
        b"tools/call",
    )
    await row(
        "/mcp",
        "solve unknown argument (vote)",
        tool({"task": "What is 6 * 7?", "vote": 3}),
        b"tools/call",
    )
    await row(
        "/mcp",
        "solve unknown playbook",
        tool({"task": "What is 6 * 7?", "playbook": "nope"}),
        b"tools/call",
    )

    def graph(
        make: Callable[[Any], Awaitable[Any]],
    ) -> Callable[[Counter], Awaitable[tuple[int | None, str, str, str]]]:
        async def attempt(counter: Counter) -> tuple[int | None, str, str, str]:
            client = get_client(url=url, api_key=KEY)
            client.http.client.event_hooks["request"].append(counter)
            try:
                await make(client)
            except httpx.HTTPStatusError as exc:
                return graph_error(exc)
            return 200, "accepted", "", "no error"

        return attempt

    vote = {"task": "What is 6 * 7?", "mode": "vote"}

    async def streamed(client: Any, **kwargs: Any) -> None:
        async for _ in client.runs.stream(None, "solve", **kwargs):
            pass

    await row(
        "graph API",
        "runs.wait votes -1 (stateless)",
        graph(lambda c: c.runs.wait(None, "solve", input={**vote, "votes": -1})),
    )
    await row(
        "graph API",
        "runs.create context max_concurrency -3",
        graph(lambda c: c.runs.create(None, "solve", input=vote, context={"max_concurrency": -3})),
    )
    await row(
        "graph API",
        "runs.stream unknown input field (vote)",
        graph(lambda c: streamed(c, input={"task": "What is 6 * 7?", "vote": 3})),
    )
    await row(
        "graph API",
        "runs.wait unknown playbook",
        graph(lambda c: c.runs.wait(None, "solve", input={**vote, "playbook": "nope"})),
    )
    await row(
        "graph API",
        "runs.wait plan with an output schema",
        graph(
            lambda c: c.runs.wait(
                None,
                "plan",
                input={
                    "task": "Add 2 and 2, then write a note.",
                    "output_schema": {"type": "object"},
                },
            )
        ),
    )
    await row(
        "graph API",
        "runs.list on another tenant's thread",
        graph(lambda c: c.runs.list(other_thread)),
    )
    return rows


def as_json(rows: list[Row]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=1)
