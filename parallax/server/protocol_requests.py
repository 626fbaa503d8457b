"""Aegra's answers brought to the Agent Protocol as LangGraph's clients read it.

Four differences, each found by langgraph-sdk's integration suite or Aegra's own e2e suite run
against `parallax serve` (docs/deploy.md, "Agent Protocol conformance"), each a change to one
Aegra route that could go upstream as it is. Admission (server/admission.py) applies them to the
requests it has admitted:

- **A graph id is an assistant id on every /assistants/{id} route.** Aegra accepts a graph id
  (`"solve"`) where a run or a cron names its assistant, but `GET /assistants/solve/graph`,
  `/schemas`, `/subgraphs`, `GET/PATCH/DELETE /assistants/solve`, `/versions`, `/latest` were
  404. langgraph-api resolves a graph id to the graph's default assistant (uuid5 of the graph
  id, Aegra's `resolve_assistant_id` computes the same id); so does `assistant_path`, by rewriting
  the path before Aegra routes it. Only ids that are graphs of this server are rewritten.
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
  default 10 s; looked at every 50 ms, each look on a pool connection given back before the
  sleep) and carries its final status (`interrupted` for cancel and interrupt alike, Aegra's
  terminal state for both); after the wait it answers what it has, as Aegra's `wait=1` does.
- **A resume right after an interrupt resumes.** `RemoteGraph.astream_events(Command(resume=x),
  version="v3")` sends `run.start` with `input: x`; Aegra (like langgraph-api) reads input on an
  interrupted thread as the answer to the interrupt, but it judges "interrupted" by the thread's
  status, which Aegra writes only once the interrupted run has finished. A client that resumes as
  soon as it sees the interrupt event (the SDK's own test does) got there first, and `x` was taken
  as a new input. Admission waits for that status first (server/run_checks.py `settled_status`),
  then decides whether `x` is an input to check or an answer to check.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from parallax.server.connections import connection

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
ASSISTANT_PATH = re.compile(r"^/assistants/(?P<id>[^/]+)(?P<rest>/.*)?$")
NOT_ASSISTANT_IDS = {"search", "count"}
ENDED = ("success", "error", "interrupted", "timeout")
CRON_OF_RUN_SQL = """
SELECT c.cron_id FROM runs r JOIN crons c
  ON c.payload -> 'config' -> 'metadata' ->> 'parallax_cron' = r.config -> 'metadata' ->> 'parallax_cron'
 AND c.user_id = r.user_id
WHERE r.run_id = %s AND r.user_id = %s
"""


def assistant_path(path: str) -> str | None:
    """The path with the graph's default assistant's id, when `path` names a graph of this server as an assistant."""
    found = ASSISTANT_PATH.match(path)
    if found is None or found["id"] in NOT_ASSISTANT_IDS:
        return None
    from aegra_api.services.langgraph_service import get_langgraph_service
    from aegra_api.utils.assistants import resolve_assistant_id

    graphs = get_langgraph_service().list_graphs()
    if found["id"] not in graphs:
        return None
    return f"/assistants/{resolve_assistant_id(found['id'], graphs)}{found['rest'] or ''}"


def answered_json(messages: list[Message]) -> tuple[Message, Any]:
    """(the start message of a kept answer, its JSON when it is a 200 that parses, else None)."""
    start = next((m for m in messages if m["type"] == "http.response.start"), {"status": 500, "headers": []})
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    try:
        return start, (json.loads(body) if start["status"] == 200 else None)
    except ValueError:
        return start, None


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


async def answer_cron(messages: list[Message], send: Send, tenant: str) -> None:
    """Aegra's answer to a cron's creation, as the cron (or as Aegra gave it, when it is no started run)."""
    start, run = answered_json(messages)
    if isinstance(run, dict) and "run_id" in run and "cron_id" not in run:
        if (cron := await cron_answer(run, tenant)) is not None:
            await answer(send, start, cron)
            return
    await replay_messages(send, messages)


async def ended_status(run_id: str, tenant: str, timeout_s: float) -> dict[str, Any] | None:
    """The run's status and updated_at once it has ended (None: still going after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        async with connection() as conn:
            row = await (await conn.execute("SELECT status, updated_at FROM runs WHERE run_id = %s AND user_id = %s",
                                            (run_id, tenant))).fetchone()
        if row is None or row[0] in ENDED:
            return None if row is None else {"status": row[0], "updated_at": row[1].isoformat()}
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(0.05)


async def answer_cancel(messages: list[Message], send: Send, run_id: str, tenant: str) -> None:
    """Aegra's answer to a cancel, once the run has ended (or as Aegra gave it, after the wait)."""
    start, run = answered_json(messages)
    if isinstance(run, dict) and run.get("status") in ("pending", "running"):
        ended = await ended_status(run_id, tenant, float(os.environ.get("PARALLAX_CANCEL_WAIT_S", "10")))
        if ended is not None:
            await answer(send, start, {**run, **ended})
            return
    await replay_messages(send, messages)
