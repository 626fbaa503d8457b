"""What Aegra accepts on a run but does not do: double-texting strategies and webhooks.

Admission calls these for every run creation it admitted, just before the request goes on to Aegra.
See docs/deploy.md#double-texting-webhooks-retention and docs/internals/server.md.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import AsyncExitStack
from typing import Any

import httpx

from parallax.runtime import settings as settings_mod
from parallax.runtime import webhooks
from parallax.runtime.storage.retention import delete_run_checkpoints
from parallax.server.connections import LockBusy, connection, thread_lock
from parallax.server.refusals import Refused, invalid

ASGIApp = Any
"""An ASGI application (called in process for the caller's cancel and delete requests)."""
ACTIVE = ("pending", "running")


class ThreadLock:
    """The per-thread double-texting lock (all replicas), whose connection also runs the checks made
    under it. Acquired and released apart: released as soon as Aegra starts answering (the next
    request may then look), and again, harmlessly, at the end."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.conn: Any = None  # the lock's psycopg AsyncConnection while held
        self._held = AsyncExitStack()

    async def acquire(self, timeout_s: float) -> bool:
        try:
            self.conn = await self._held.enter_async_context(thread_lock(self.thread_id, timeout_s))
        except LockBusy:
            return False
        return True

    async def release(self) -> None:
        self.conn = None
        await self._held.aclose()

    async def active_runs(self, tenant: str) -> list[str] | None:
        """The tenant's runs of this thread in flight, oldest first; None when the thread is another
        tenant's."""
        assert self.conn is not None
        owner = await (
            await self.conn.execute(
                "SELECT user_id FROM thread WHERE thread_id = %s", (self.thread_id,)
            )
        ).fetchone()
        if owner is not None and owner[0] != tenant:
            return None
        cursor = await self.conn.execute(
            "SELECT run_id FROM runs WHERE thread_id = %s AND user_id = %s AND status IN"
            " ('pending', 'running') ORDER BY created_at, run_id",
            (self.thread_id, tenant),
        )
        return [row[0] for row in await cursor.fetchall()]


async def wait_until_stopped(run_ids: list[str], timeout_s: float) -> bool:
    """Whether the runs all ended within `timeout_s` (each look takes a pool connection and gives it
    back)."""
    deadline = time.monotonic() + timeout_s
    while True:
        async with connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) FROM runs WHERE run_id = ANY(%s) AND status IN ('pending',"
                " 'running')",
                (run_ids,),
            )
            left = (await cursor.fetchone())[0]
        if left == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.1)


def caller_headers(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The caller's credentials, for the in-process calls made on its behalf."""
    wanted = {b"x-api-key", b"authorization"}
    return {k.decode(): v.decode() for k, v in headers if k.lower() in wanted}


async def stop_runs(
    app: ASGIApp,
    headers: dict[str, str],
    lock: ThreadLock,
    run_ids: list[str],
    strategy: str,
    wait_s: float,
) -> None:
    """Interrupt (or, for rollback, cancel and delete) the runs in flight through Aegra's own
    endpoints, called in process (`app`) with the credentials in `headers`."""
    thread_id, action = lock.thread_id, "interrupt" if strategy == "interrupt" else "cancel"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://parallax.internal",
        headers=headers,
        timeout=wait_s + 15,
    ) as client:
        for run_id in run_ids:
            await client.post(
                f"/threads/{thread_id}/runs/{run_id}/cancel", params={"action": action}
            )
        await wait_until_stopped(run_ids, wait_s)
        if strategy == "rollback":
            for run_id in run_ids:
                await client.delete(f"/threads/{thread_id}/runs/{run_id}", params={"force": 1})
            assert lock.conn is not None
            await delete_run_checkpoints(lock.conn, thread_id, run_ids)


async def check_webhook(webhook: Any, tenant: str, settings: settings_mod.Settings) -> None:
    """Refused (422) unless the tenant may have webhooks and `webhook` is a URL it may be sent
    to."""
    if tenant not in settings.webhook_tenant_secrets:
        raise invalid(
            f"tenant {tenant!r} has no webhook secret (PARALLAX_WEBHOOK_SECRETS): webhooks are"
            " signed, and none is sent unsigned",
            "webhook",
        )
    if not isinstance(webhook, str) or len(webhook) > 2048:
        raise invalid("webhook must be an http(s) URL of at most 2048 characters", "webhook")
    try:
        await webhooks.check_url(webhook, webhooks.parse_networks(settings.webhook_allow_networks))
    except webhooks.WebhookUnresolved:
        pass  # DNS may answer later: every delivery attempt checks again
    except webhooks.WebhookRefused as exc:
        raise invalid(str(exc), "webhook") from None


async def arm_webhook(tenant: str, url: str) -> str:
    """A new outbox row for a run about to be created; its id."""
    webhook_id = str(uuid.uuid4())
    async with connection() as conn:
        await conn.execute(webhooks.ARM_SQL, {"id": webhook_id, "tenant": tenant, "url": url})
    return webhook_id


class DoubleText:
    """A thread run's double-texting, from the check under the lock to Aegra's first answer."""

    def __init__(self, thread_id: str | None, strategy: str) -> None:
        self.lock = (
            ThreadLock(thread_id) if thread_id is not None and strategy != "enqueue" else None
        )
        self.strategy = strategy

    async def act(self, app: ASGIApp, headers: list[tuple[bytes, bytes]], tenant: str) -> None:
        """Take the thread's turn and act on its runs in flight; Refused (409) for reject, or no
        turn in time."""
        if self.lock is None:
            return
        from parallax.server import metrics

        wait_s = settings_mod.load().double_text_wait_s
        thread_id = self.lock.thread_id
        if not await self.lock.acquire(wait_s + 10):
            raise Refused(
                409,
                f"thread {thread_id} is busy with another double-text: retry",
                "multitask_strategy",
            )
        in_flight = await self.lock.active_runs(tenant)
        if not in_flight:
            return
        metrics.DOUBLE_TEXTS.labels(strategy=self.strategy).inc()
        if self.strategy == "reject":
            raise Refused(
                409,
                f"thread {thread_id} has a run in flight ({in_flight[0]}): multitask_strategy "
                "'reject' refuses another until it ends",
                "multitask_strategy",
            )
        await stop_runs(app, caller_headers(headers), self.lock, in_flight, self.strategy, wait_s)

    async def release(self) -> None:
        if self.lock is not None:
            await self.lock.release()
