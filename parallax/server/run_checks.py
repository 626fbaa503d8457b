"""What admission asks the database about a run request: assistant, thread, checkpoint, playbook.

One short query each, no connection held between two; another tenant's thread is answered as one
that does not exist.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from parallax.runtime.storage.namespaces import playbook_namespace
from parallax.server.connections import connection


@dataclass(frozen=True)
class Assistant:
    """The graph an assistant runs, with the config and context it adds to every run of it (Aegra
    merges them)."""

    graph: str
    config: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ThreadFacts:
    """A thread as admission needs it (`owner` None: no such thread yet; a run creates it)."""

    owner: str | None = None
    user: str | None = None
    """The user below the tenant whose thread it is (None: the tenant's administrator's;
    server/ownership.py)."""
    status: str | None = None
    has_run: bool = False
    last_assistant: str | None = None


def served_graphs() -> list[str]:
    """The graph ids this server serves (aegra.json's graphs, Parallax's and any the operator
    added)."""
    from aegra_api.services.langgraph_service import get_langgraph_service

    return list(get_langgraph_service().list_graphs())


async def assistant_of(assistant_id: Any, tenant: str) -> Assistant | None:
    """The assistant a run names (a graph id means the graph's default assistant); None: none the
    tenant may use."""
    if not isinstance(assistant_id, str) or not assistant_id or len(assistant_id) > 256:
        return None
    from aegra_api.utils.assistants import resolve_assistant_id

    resolved = resolve_assistant_id(assistant_id, dict.fromkeys(served_graphs()))
    async with connection() as conn:
        row = await (
            await conn.execute(
                "SELECT graph_id, config, context FROM assistant WHERE assistant_id = %s AND"
                " user_id IN (%s, 'system')",
                (resolved, tenant),
            )
        ).fetchone()
    if row is None:
        return None
    return Assistant(str(row[0]), dict(row[1] or {}), dict(row[2] or {}))


async def thread_facts(thread_id: str) -> ThreadFacts:
    async with connection() as conn:
        row = await (
            await conn.execute(
                "SELECT t.user_id, t.status, (SELECT r.assistant_id FROM runs r WHERE r.thread_id ="
                " t.thread_id AND r.user_id = t.user_id ORDER BY r.created_at DESC LIMIT 1),"
                " t.metadata_json->>'parallax_user' FROM thread t WHERE t.thread_id = %s",
                (thread_id,),
            )
        ).fetchone()
    if row is None:
        return ThreadFacts()
    return ThreadFacts(
        owner=str(row[0]),
        user=row[3],
        status=row[1],
        has_run=row[2] is not None,
        last_assistant=row[2],
    )


async def checkpoint_on_thread(thread_id: str, checkpoint_id: str) -> bool:
    """Whether `checkpoint_id` is one of the thread's own checkpoints (its root namespace)."""
    async with connection() as conn:
        row = await (
            await conn.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' AND"
                " checkpoint_id = %s",
                (thread_id, checkpoint_id),
            )
        ).fetchone()
    return row is not None


async def playbook_exists(tenant: str, name: str) -> bool:
    """Whether the tenant's playbook `name` has any record (the CLI's `require_known` asks the same
    of its store)."""
    async with connection() as conn:
        row = await (
            await conn.execute(
                "SELECT 1 FROM store WHERE prefix = %s LIMIT 1",
                (".".join(playbook_namespace(tenant, name)),),
            )
        ).fetchone()
    return row is not None


PENDING_INTERRUPT_SQL = """
SELECT t.status, EXISTS (
  SELECT 1 FROM checkpoint_writes w
  WHERE w.thread_id = t.thread_id AND w.checkpoint_ns = '' AND w.channel = '__interrupt__'
     AND w.checkpoint_id = (SELECT max(c.checkpoint_id) FROM checkpoints c
                            WHERE c.thread_id = t.thread_id AND c.checkpoint_ns = ''))
FROM thread t WHERE t.thread_id = %s AND t.user_id = %s
"""


async def settled_status(
    thread_id: str, tenant: str, timeout_s: float = 5.0, every_s: float = 0.05
) -> str | None:
    """The thread's status once a pending interrupt is recorded as `interrupted` (None: no thread).

    Aegra marks the thread only after the interrupt is written, and an answer sent in between is
    still an answer (docs/internals/server.md#agent-protocol-fix-ups)."""
    deadline = time.monotonic() + timeout_s
    while True:
        async with connection() as conn:
            row = await (await conn.execute(PENDING_INTERRUPT_SQL, (thread_id, tenant))).fetchone()
        if row is None:
            return None
        status, pending = row
        if status == "interrupted" or not pending or time.monotonic() >= deadline:
            return str(status)
        await asyncio.sleep(every_s)
