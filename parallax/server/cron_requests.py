"""Webhooks and double-texting on the runs crons create (ASGI middleware on Aegra's cron routes).

A cron's runs pass no HTTP run route (server/run_requests.py): Aegra's scheduler inserts them
itself, and so does the cron's creation for its first run. What reaches them is the cron's stored
payload: Aegra copies its `config` and `multitask_strategy` onto every run it creates (not its
`webhook`, nor its metadata). So this middleware, on POST /runs/crons, POST
/threads/{id}/runs/crons and PATCH /runs/crons/{id}, before Aegra sees the request:
- checks `webhook` as on a run (runtime/webhooks.py: http(s), every address public or allowed,
  the tenant has a secret; 422 and no cron otherwise); Aegra stores it in the cron's payload;
- checks `multitask_strategy` (a thread-bound cron without one gets PARALLAX_MULTITASK_STRATEGY,
  as a run request does);
- puts a link of its own in the cron's config (`config.metadata.parallax_cron`, kept when an
  update replaces the config), which every run of the cron carries. The trigger
  `parallax_cron_run` (runtime/storage/platform_schema.py) finds the cron by it as Aegra inserts
  the run: it arms the webhook and enforces "reject"; "enqueue" holds for every run anyway
  (the claim trigger), and server/platform.py stops the runs in flight for "interrupt" and
  "rollback" crons.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from starlette.responses import JSONResponse

from parallax.runtime import settings as settings_mod
from parallax.runtime import webhooks
from parallax.server.connections import connection
from parallax.server.run_requests import (
    STRATEGIES,
    ASGIApp,
    Receive,
    RunRequests,
    Scope,
    Send,
    error,
    json_request,
    replay,
    with_length,
)

CREATE = re.compile(r"^(?:/threads/(?P<thread_id>[^/]+))?/runs/crons/?$")
UPDATE = re.compile(r"^/runs/crons/(?P<cron_id>[^/]+)/?$")


def linked(config: Any, link: str) -> dict[str, Any]:
    """`config` (the caller's, or the cron's stored one) with the cron's link in its metadata."""
    given: dict[str, Any] = dict(config) if isinstance(config, dict) else {}
    metadata = given.get("metadata")
    given["metadata"] = {**(metadata if isinstance(metadata, dict) else {}), webhooks.CRON_LINK_KEY: link}
    return given


async def stored_config(cron_id: str, tenant: str) -> tuple[Any, str | None] | None:
    """The tenant's cron's stored config and link; None when it has no such cron (Aegra answers 404)."""
    async with connection() as conn:
        row = await (await conn.execute(
            "SELECT payload -> 'config', payload -> 'config' -> 'metadata' ->> %s FROM crons "
            "WHERE cron_id = %s AND user_id = %s", (webhooks.CRON_LINK_KEY, cron_id, tenant))).fetchone()
    return None if row is None else (row[0], row[1])


class CronRequests:
    """The middleware (server/app.py adds it to the app Aegra serves)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope.get("method"), scope.get("path", "")
        create = CREATE.match(path) if scope["type"] == "http" and method == "POST" else None
        update = UPDATE.match(path) if scope["type"] == "http" and method == "PATCH" else None
        if create is None and update is None:
            await self.app(scope, receive, send)
            return
        body, payload, tenant = await json_request(scope, receive)
        if isinstance(payload, dict) and tenant is not None:
            refused = await self.prepare(payload, tenant, create, update)
            if refused is not None:
                await refused(scope, receive, send)
                return
            body = json.dumps(payload).encode()
        await self.app(with_length(scope, len(body)), replay(body, receive), send)  # Aegra answers the rest: 422, 401

    @staticmethod
    async def prepare(payload: dict[str, Any], tenant: str, create: re.Match[str] | None,
                      update: re.Match[str] | None) -> JSONResponse | None:
        """Check the request and link the cron (in place); the error to answer instead, or None."""
        settings = settings_mod.load()
        strategy = payload.get("multitask_strategy")
        if create is not None and create["thread_id"] is not None and strategy is None:
            strategy = payload["multitask_strategy"] = settings.multitask_strategy
        if strategy is not None and strategy not in STRATEGIES:
            return error(422, f"multitask_strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
        webhook = payload.get("webhook")
        if webhook is not None and (refused := await RunRequests.check_webhook(webhook, tenant, payload, settings)):
            return refused
        if create is not None:
            payload["config"] = linked(payload.get("config"), str(uuid.uuid4()))
        elif update is not None and ("config" in payload or webhook is not None):
            stored = await stored_config(update["cron_id"], tenant)
            if stored is not None:  # a new config keeps the link; an old cron without one gets one
                config, link = stored
                payload["config"] = linked(payload["config"] if "config" in payload else config,
                                           link or str(uuid.uuid4()))
        return None
