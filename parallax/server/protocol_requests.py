"""Aegra's answers brought to the Agent Protocol as LangGraph's clients read it (ASGI middleware, outermost of ours).

Four differences, each found by langgraph-sdk's integration suite or Aegra's own e2e suite run
against `parallax serve` (docs/deploy.md, "Agent Protocol conformance"), each a patch to one
Aegra route that could go upstream as it is:

- **A graph id is an assistant id on every /assistants/{id} route.** Aegra accepts a graph id
  (`"solve"`) where a run or a cron names its assistant, but `GET /assistants/solve/graph`,
  `/schemas`, `/subgraphs`, `GET/PATCH/DELETE /assistants/solve`, `/versions`, `/latest` were
  404. langgraph-api resolves a graph id to the graph's default assistant (uuid5 of the graph
  id, Aegra's `resolve_assistant_id` computes the same id); so does this, by rewriting the path
  before Aegra routes it. Only ids that are graphs of this server are rewritten.
- **`crons.create` answers the cron.** Aegra answered the Run its creation starts (its
  `_create_cron_atomic`), without `cron_id`, so a client cannot update or delete what it just
  made (langgraph-api answers the Cron). The answer is now the cron as `crons.search` shows it,
  plus `run_id`: the first run Aegra still starts at creation (kept: Parallax's cron webhooks
  and double-texting, server/cron_requests.py, rely on it; Aegra's own suite reads `run_id`).
  The cron is found through the link every run of a cron carries
  (`config.metadata.parallax_cron`, put there by server/cron_requests.py).
- **`runs.cancel` answers the state the run ends in.** Aegra's cancel without `wait=1` answered
  the run as it was when the stop was requested (`running`), so a client reading the answer
  saw a run that was still going; with `wait=1` it polls every 0.5 s. Here, when Aegra's answer
  is still pending/running, the answer waits until the run has ended (PARALLAX_CANCEL_WAIT_S,
  default 10 s; checked every 50 ms) and carries its final status (`interrupted` for
  cancel and interrupt alike, Aegra's terminal state for both); after the wait it answers what it
  has, as Aegra's `wait=1` does.
- **A resume right after an interrupt resumes.** `RemoteGraph.astream_events(Command(resume=x),
  version="v3")` sends `run.start` with `input: x`; Aegra (like langgraph-api) reads input on an
  interrupted thread as the answer to the interrupt, but it judges "interrupted" by the thread's
  status, which Aegra writes only once the interrupted run has finished. A client that resumes as
  soon as it sees the interrupt event (the SDK's own test does) got there first, and `x` was taken
  as a new input ("Input should be a valid dictionary"). Here a `run.start` with input, on a
  thread whose latest checkpoint holds a pending interrupt and whose status is not yet
  `interrupted`, waits for that status (at most 5 s, checked every 50 ms), then goes to Aegra
  unchanged (langgraph-api reads the pending interrupt from the checkpoint itself). The wait is
  `settle_interrupt`, called where the command is first read (server/run_checks.py, and
  server/event_socket.py for one sent on the WebSocket): whether `x` is an input to check or an
  answer depends on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from typing import Any

from parallax.server.auth import key_from, tenant_for_key
from parallax.server.run_requests import ASGIApp, Message, Receive, Scope, Send

ASSISTANT_PATH = re.compile(r"^/assistants/(?P<id>[^/]+)(?P<rest>/.*)?$")
CRON_CREATE = re.compile(r"^(?:/threads/[^/]+)?/runs/crons/?$")
COMMANDS = re.compile(r"^/threads/(?P<thread_id>[^/]+)/commands/?$")
"""Agent Protocol v2 commands (Aegra's POST /threads/{id}/commands; the WebSocket sends the same)."""
RUN_COMMANDS = ("run.start", "input.respond")
"""The commands that start a run: the run checks (server/run_checks.py) and the daily budget look at these."""
CANCEL = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)/cancel/?$")
NOT_ASSISTANT_IDS = {"search", "count"}
ENDED = ("success", "error", "interrupted", "timeout")
CRON_OF_RUN_SQL = """
SELECT c.cron_id FROM runs r JOIN crons c
  ON c.payload -> 'config' -> 'metadata' ->> 'parallax_cron' = r.config -> 'metadata' ->> 'parallax_cron'
 AND c.user_id = r.user_id
WHERE r.run_id = %s AND r.user_id = %s
"""
PENDING_INTERRUPT_SQL = """
SELECT t.status, EXISTS (
  SELECT 1 FROM checkpoint_writes w WHERE w.thread_id = t.thread_id AND w.checkpoint_ns = '' AND w.channel = '__interrupt__'
     AND w.checkpoint_id = (SELECT max(c.checkpoint_id) FROM checkpoints c
                            WHERE c.thread_id = t.thread_id AND c.checkpoint_ns = ''))
FROM thread t WHERE t.thread_id = %s AND t.user_id = %s
"""


def graph_assistant_id(requested: str) -> str | None:
    """The default assistant's id when `requested` is a graph of this server, else None."""
    if requested in NOT_ASSISTANT_IDS:
        return None
    from aegra_api.services.langgraph_service import get_langgraph_service
    from aegra_api.utils.assistants import resolve_assistant_id

    graphs = get_langgraph_service().list_graphs()
    return resolve_assistant_id(requested, graphs) if requested in graphs else None


def tenant_of(scope: Scope) -> str | None:
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    return tenant_for_key(key_from(headers))


async def buffered(app: ASGIApp, scope: Scope, receive: Receive) -> tuple[Message, Any, list[Message]]:
    """Run `app` and keep its answer: (the start message, its JSON when it is a 200 that parses, else None,
    every message in order)."""
    messages: list[Message] = []

    async def keep(message: Message) -> None:
        messages.append(message)

    await app(scope, receive, keep)
    start = next((m for m in messages if m["type"] == "http.response.start"), {"status": 500, "headers": []})
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    try:
        answered = json.loads(body) if start["status"] == 200 else None
    except ValueError:
        answered = None
    return start, answered, messages


async def answer(send: Send, start: Message, payload: Any) -> None:
    body = json.dumps(payload, default=str).encode()
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in (b"content-length", b"content-type")]
    await send({"type": "http.response.start", "status": start["status"],
                "headers": [*headers, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def replay_messages(send: Send, messages: list[Message]) -> None:
    for message in messages:
        await send(message)


async def cron_answer(run: dict[str, Any], tenant: str) -> dict[str, Any] | None:
    """The cron whose creation started `run`, as crons.search shows it, with the run's id; None if not found."""
    from aegra_api.api.crons import _cron_to_response
    from aegra_api.core.orm import Cron as CronORM
    from aegra_api.core.orm import _get_session_maker

    from parallax.server.connections import connection

    async with connection() as conn:
        row = await (await conn.execute(CRON_OF_RUN_SQL, (run["run_id"], tenant))).fetchone()
    if row is None:
        return None
    async with _get_session_maker()() as session:
        cron = await session.get(CronORM, row[0])
        if cron is None:
            return None
        shown: dict[str, Any] = _cron_to_response(cron).model_dump(mode="json")
    return {**shown, "run_id": run["run_id"]}


async def ended_status(run_id: str, tenant: str, timeout_s: float) -> dict[str, Any] | None:
    """The run's status and updated_at once it has ended (None: still going after `timeout_s`)."""
    from parallax.server.connections import connection

    deadline = time.monotonic() + timeout_s
    async with connection() as conn:
        while True:
            row = await (await conn.execute("SELECT status, updated_at FROM runs WHERE run_id = %s AND user_id = %s",
                                            (run_id, tenant))).fetchone()
            if row is None or row[0] in ENDED:
                return None if row is None else {"status": row[0], "updated_at": row[1].isoformat()}
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.05)


async def settle_interrupt(thread_id: str, tenant: str, timeout_s: float = 5.0) -> None:
    """Return once the thread is `interrupted`, or at once when it has no pending interrupt (or `timeout_s` passed)."""
    from parallax.server.connections import connection

    deadline = time.monotonic() + timeout_s
    async with connection() as conn:
        while time.monotonic() < deadline:
            row = await (await conn.execute(PENDING_INTERRUPT_SQL, (thread_id, tenant))).fetchone()
            if row is None or row[0] == "interrupted" or not row[1]:
                return
            await asyncio.sleep(0.05)


def starts_with_input(payload: Any) -> bool:
    """A v2 `run.start` command that carries input (maybe the answer to a pending interrupt)."""
    params = payload.get("params") if isinstance(payload, dict) else None
    return isinstance(params, dict) and payload.get("method") == "run.start" and params.get("input") is not None


class ProtocolRequests:
    """The four rewrites above; every other request passes through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        if (found := ASSISTANT_PATH.match(path)) and (assistant_id := graph_assistant_id(found["id"])):
            new_path = f"/assistants/{assistant_id}{found['rest'] or ''}"
            scope = {**scope, "path": new_path, "raw_path": new_path.encode()}
            await self.app(scope, receive, send)
        elif method == "POST" and CRON_CREATE.match(path):
            await self.cron_create(scope, receive, send)
        elif method == "POST" and (found := CANCEL.match(path)) and b"wait=1" not in scope.get("query_string", b""):
            await self.cancel(scope, receive, send, found["run_id"])
        else:
            await self.app(scope, receive, send)

    async def cron_create(self, scope: Scope, receive: Receive, send: Send) -> None:
        start, run, messages = await buffered(self.app, scope, receive)
        tenant = tenant_of(scope)
        if tenant and isinstance(run, dict) and "run_id" in run and "cron_id" not in run:
            if (cron := await cron_answer(run, tenant)) is not None:
                await answer(send, start, cron)
                return
        await replay_messages(send, messages)

    async def cancel(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        start, run, messages = await buffered(self.app, scope, receive)
        tenant = tenant_of(scope)
        if tenant and isinstance(run, dict) and run.get("status") in ("pending", "running"):
            ended = await ended_status(run_id, tenant, float(os.environ.get("PARALLAX_CANCEL_WAIT_S", "10")))
            if ended is not None:
                await answer(send, start, {**run, **ended})
                return
        await replay_messages(send, messages)
