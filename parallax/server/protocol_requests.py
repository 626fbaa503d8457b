"""Aegra's answers brought to the Agent Protocol as LangGraph's clients read it (done by admission).

Graph ids as assistant ids, `crons.create` answering the cron, `runs.cancel` answering the end
state, a resume right after an interrupt. See docs/internals/server.md#agent-protocol-fix-ups.
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
  ON c.payload -> 'config' -> 'metadata' ->> 'parallax_cron'
     = r.config -> 'metadata' ->> 'parallax_cron'
 AND c.user_id = r.user_id
WHERE r.run_id = %s AND r.user_id = %s
"""


def assistant_path(path: str) -> str | None:
    """The path with the graph's default assistant's id, when `path` names a graph of this server as
    an assistant."""
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
    start = next(
        (m for m in messages if m["type"] == "http.response.start"), {"status": 500, "headers": []}
    )
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    try:
        return start, (json.loads(body) if start["status"] == 200 else None)
    except ValueError:
        return start, None


async def answer(send: Send, start: Message, payload: Any) -> None:
    body = json.dumps(payload, default=str).encode()
    headers = [
        (k, v)
        for k, v in start.get("headers", [])
        if k.lower() not in (b"content-length", b"content-type")
    ]
    await send(
        {
            "type": "http.response.start",
            "status": start["status"],
            "headers": [
                *headers,
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def replay_messages(send: Send, messages: list[Message]) -> None:
    for message in messages:
        await send(message)


async def cron_answer(run: dict[str, Any], tenant: str) -> dict[str, Any] | None:
    """The cron whose creation started `run`, as crons.search shows it, with the run's id; None if
    not found."""
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
    """Aegra's answer to a cron's creation, as the cron (or as Aegra gave it, when it is no started
    run)."""
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
            row = await (
                await conn.execute(
                    "SELECT status, updated_at FROM runs WHERE run_id = %s AND user_id = %s",
                    (run_id, tenant),
                )
            ).fetchone()
        if row is None or row[0] in ENDED:
            return None if row is None else {"status": row[0], "updated_at": row[1].isoformat()}
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(0.05)


async def answer_cancel(messages: list[Message], send: Send, run_id: str, tenant: str) -> None:
    """Aegra's answer to a cancel, once the run has ended (or as Aegra gave it, after the wait)."""
    start, run = answered_json(messages)
    if isinstance(run, dict) and run.get("status") in ("pending", "running"):
        ended = await ended_status(
            run_id, tenant, float(os.environ.get("PARALLAX_CANCEL_WAIT_S", "10"))
        )
        if ended is not None:
            await answer(send, start, {**run, **ended})
            return
    await replay_messages(send, messages)
