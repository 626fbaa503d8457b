"""What Aegra accepts on a run but does not carry out: double-texting strategies and webhooks (ASGI middleware).

It sees every run creation (POST /threads/{id}/runs, …/runs/stream, …/runs/wait and the stateless
/runs, /runs/stream, /runs/wait) before Aegra does, and passes the request on, changed, or answers it.

Double-texting (thread runs; LangGraph's `multitask_strategy`, default PARALLAX_MULTITASK_STRATEGY,
"enqueue" as on LangGraph Platform). Runs of one thread never run side by side, whatever the
strategy: the trigger `parallax_claim_in_order` (runtime/storage/platform_schema.py) lets a worker
start a run only once no other run of its thread runs and no older one waits, and
server/platform.py's dispatcher hands a held run to a worker once its thread is free. That is
"enqueue". The other three act on the runs in flight (pending or running) first, under a
PostgreSQL advisory lock per thread held from the check until Aegra has stored the new run, so
requests on several replicas at once take turns:
- reject: a run in flight -> 409, nothing created;
- interrupt: each run in flight is interrupted (Aegra's cancel endpoint, action=interrupt: the
  replica running it stops it, its status becomes "interrupted", its checkpoints stay) and waited
  for (PARALLAX_DOUBLE_TEXT_WAIT_S), then the new run is created: it starts from the interrupted
  run's last checkpoint;
- rollback: the same with action=cancel, then the runs are deleted (Aegra's delete endpoint) and
  so are the checkpoints they wrote, so the new run starts from the thread as it was before them.
Cancel and delete go through Aegra's own endpoints, called in process with the caller's key: a
caller can only stop runs it could stop itself.

Webhooks (every run creation): `webhook` is checked (runtime/webhooks.py: http(s), every address
public or allowed; the tenant has a secret), an outbox row is armed, and its id is put in the run's
metadata (`parallax_webhook`), where the run-ended trigger finds it. A refused webhook is a 422
and no run is created.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AsyncExitStack
from typing import Any

import httpx
from starlette.responses import JSONResponse

from parallax.runtime import settings as settings_mod
from parallax.runtime import webhooks
from parallax.runtime.storage.platform_schema import THREAD_LOCK_CLASS
from parallax.runtime.storage.postgres import LockTimeout, advisory_lock
from parallax.runtime.storage.retention import delete_run_checkpoints
from parallax.server import metrics
from parallax.server.auth import key_from, tenant_for_key
from parallax.server.connections import connection
from parallax.server.trace_context import carry_trace_context

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

THREAD_RUN = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs(?:/stream|/wait)?/?$")
STATELESS_RUN = re.compile(r"^/runs(?:/stream|/wait)?/?$")
STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")
ACTIVE = ("pending", "running")


def error(status: int, message: str) -> JSONResponse:
    """An Agent Protocol error body, as Aegra writes them."""
    kind = {409: "conflict", 422: "validation_error", 503: "service_unavailable"}.get(status, "error")
    return JSONResponse({"error": kind, "message": message, "details": None}, status_code=status)


async def read_body(receive: Receive) -> bytes:
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


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


class ThreadLock:
    """The per-thread advisory lock (all replicas), whose connection of its own also runs the checks.
    It is the two-key lock (THREAD_LOCK_CLASS, hashtext(thread_id)), which the trigger on a cron's run takes as
    Aegra inserts it (runtime/storage/platform_schema.py): HTTP requests and crons' runs take the same turns.
    Acquired and released apart (released as soon as Aegra starts answering, and again, harmlessly, at the end)."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.conn: Any = None  # the lock's psycopg AsyncConnection while held
        self._held = AsyncExitStack()

    async def acquire(self, timeout_s: float) -> bool:
        lock = advisory_lock(os.environ["DATABASE_URL"], (THREAD_LOCK_CLASS, self.thread_id), timeout_s)
        try:
            self.conn = await self._held.enter_async_context(lock)
        except LockTimeout:
            return False
        return True

    async def release(self) -> None:
        self.conn = None
        await self._held.aclose()

    async def active_runs(self, tenant: str) -> list[str] | None:
        """The tenant's runs of this thread in flight, oldest first; None when the thread is another tenant's."""
        assert self.conn is not None
        owner = await (await self.conn.execute("SELECT user_id FROM thread WHERE thread_id = %s",
                                               (self.thread_id,))).fetchone()
        if owner is not None and owner[0] != tenant:
            return None
        cursor = await self.conn.execute(
            "SELECT run_id FROM runs WHERE thread_id = %s AND user_id = %s AND status IN ('pending', 'running') "
            "ORDER BY created_at, run_id", (self.thread_id, tenant))
        return [row[0] for row in await cursor.fetchall()]

    async def wait_until_stopped(self, run_ids: list[str], timeout_s: float) -> bool:
        assert self.conn is not None
        deadline = time.monotonic() + timeout_s
        while True:
            cursor = await self.conn.execute(
                "SELECT count(*) FROM runs WHERE run_id = ANY(%s) AND status IN ('pending', 'running')", (run_ids,))
            if (await cursor.fetchone())[0] == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.1)


def caller_headers(scope: Scope) -> dict[str, str]:
    """The caller's credentials, for the in-process calls made on its behalf."""
    wanted = {b"x-api-key", b"authorization"}
    return {k.decode(): v.decode() for k, v in scope["headers"] if k.lower() in wanted}


async def stop_runs(app: ASGIApp, headers: dict[str, str], lock: ThreadLock, run_ids: list[str], strategy: str,
                    wait_s: float) -> None:
    """Interrupt (or, for rollback, cancel and delete) the runs in flight through Aegra's own endpoints, called
    in process (`app`) with the credentials in `headers`."""
    thread_id, action = lock.thread_id, "interrupt" if strategy == "interrupt" else "cancel"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://parallax.internal",
                                 headers=headers, timeout=wait_s + 15) as client:
        for run_id in run_ids:
            await client.post(f"/threads/{thread_id}/runs/{run_id}/cancel", params={"action": action})
        await lock.wait_until_stopped(run_ids, wait_s)
        if strategy == "rollback":
            for run_id in run_ids:
                await client.delete(f"/threads/{thread_id}/runs/{run_id}", params={"force": 1})
            assert lock.conn is not None
            await delete_run_checkpoints(lock.conn, thread_id, run_ids)


async def arm_webhook(tenant: str, url: str) -> str:
    """A new outbox row for a run about to be created; its id."""
    webhook_id = str(uuid.uuid4())
    async with connection() as conn:
        await conn.execute(webhooks.ARM_SQL, {"id": webhook_id, "tenant": tenant, "url": url})
    return webhook_id


async def json_request(scope: Scope, receive: Receive) -> tuple[bytes, Any, str | None]:
    """A request's body, its JSON (None when it is not JSON) and the caller's tenant (None: no valid key)."""
    body = await read_body(receive)
    try:
        payload = json.loads(body or b"null")
    except ValueError:
        payload = None
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    return body, payload, tenant_for_key(key_from(headers))


async def tenant_request(app: ASGIApp, scope: Scope, receive: Receive,
                         send: Send) -> tuple[bytes, dict[str, Any], str] | None:
    """A request's body, JSON object and the caller's tenant; None when it was passed on to `app` as it came
    (not a JSON object, or no valid key: Aegra answers those, 422 or 401)."""
    body, payload, tenant = await json_request(scope, receive)
    if not isinstance(payload, dict) or tenant is None:
        await app(scope, replay(body, receive), send)
        return None
    return body, payload, tenant


class RunRequests:
    """The middleware (server/app.py adds it to the app Aegra serves)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        post = scope["type"] == "http" and scope.get("method") == "POST"
        thread = THREAD_RUN.match(scope.get("path", "")) if post else None
        if thread is None and not (post and STATELESS_RUN.match(scope.get("path", ""))):
            await self.app(scope, receive, send)
            return
        if (request := await tenant_request(self.app, scope, receive, send)) is None:
            return
        _, payload, tenant = request
        refused = await self.handle(scope, receive, send, payload, tenant, thread["thread_id"] if thread else None)
        if refused is not None:
            await refused(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send, payload: dict[str, Any], tenant: str,
                     thread_id: str | None) -> JSONResponse | None:
        """Check, act on the runs in flight, arm the webhook and pass the request on; or the error to answer."""
        settings = settings_mod.load()
        strategy = payload.get("multitask_strategy") or settings.multitask_strategy
        if thread_id is not None:
            if strategy not in STRATEGIES:
                return error(422, f"multitask_strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
            payload["multitask_strategy"] = strategy
        webhook = payload.pop("webhook", None)
        if webhook is not None and (refused := await self.check_webhook(webhook, tenant, payload, settings)):
            return refused
        if isinstance(payload.get("metadata"), dict):  # the link to an outbox row is ours to set, never the caller's
            payload["metadata"].pop(webhooks.METADATA_KEY, None)
        if isinstance(payload.get("config"), dict) and isinstance(payload["config"].get("metadata"), dict):
            payload["config"]["metadata"].pop(webhooks.CRON_LINK_KEY, None)  # and so is the link to a cron
        carry_trace_context(scope, payload)  # the caller's OpenTelemetry trace, for the run's spans
        lock = ThreadLock(thread_id) if thread_id is not None and strategy != "enqueue" else None
        try:
            if lock is not None:
                if not await lock.acquire(settings.double_text_wait_s + 10):
                    return error(409, f"thread {thread_id} is busy with another double-text: retry")
                in_flight = await lock.active_runs(tenant)
                if in_flight:
                    metrics.DOUBLE_TEXTS.labels(strategy=strategy).inc()
                    if strategy == "reject":
                        return error(409, f"thread {thread_id} has a run in flight ({in_flight[0]}): "
                                          "multitask_strategy 'reject' refuses another until it ends")
                    await stop_runs(scope["app"], caller_headers(scope), lock, in_flight, strategy,
                                    settings.double_text_wait_s)
            if webhook is not None:
                payload["metadata"] = {**(payload.get("metadata") or {}),
                                       webhooks.METADATA_KEY: await arm_webhook(tenant, webhook)}
            body = json.dumps(payload).encode()

            async def send_and_release(message: Message) -> None:
                # Aegra starts answering once it has stored the run: from then on the next request may look
                if message["type"] == "http.response.start" and lock is not None:
                    await lock.release()
                await send(message)

            await self.app(with_length(scope, len(body)), replay(body, receive), send_and_release)
        finally:
            if lock is not None:
                await lock.release()
        return None

    @staticmethod
    async def check_webhook(webhook: Any, tenant: str, payload: dict[str, Any],
                            settings: settings_mod.Settings) -> JSONResponse | None:
        if tenant not in settings.webhook_tenant_secrets:
            return error(422, f"tenant {tenant!r} has no webhook secret (PARALLAX_WEBHOOK_SECRETS): "
                              "webhooks are signed, and none is sent unsigned")
        if not isinstance(payload.get("metadata"), dict | None):
            return error(422, "metadata must be an object")
        try:
            await webhooks.check_url(webhook, webhooks.parse_networks(settings.webhook_allow_networks))
        except webhooks.WebhookUnresolved:
            pass  # DNS may answer later: every delivery attempt checks again
        except webhooks.WebhookRefused as exc:
            return error(422, str(exc))
        return None
