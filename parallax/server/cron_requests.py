"""Webhooks and double-texting on the runs crons create, set up as the cron is created or changed.

A cron's runs pass no HTTP run route, so admission links the cron to its runs and the triggers act
on them. See docs/internals/server.md#double-texting-and-webhooks.
"""

from __future__ import annotations

import uuid
from typing import Any

from parallax.runtime import settings as settings_mod
from parallax.runtime import webhooks
from parallax.server.connections import connection
from parallax.server.run_requests import check_webhook


def linked(config: Any, link: str) -> dict[str, Any]:
    """`config` (the caller's, or the cron's stored one) with the cron's link in its metadata."""
    given: dict[str, Any] = dict(config) if isinstance(config, dict) else {}
    metadata = given.get("metadata")
    given["metadata"] = {
        **(metadata if isinstance(metadata, dict) else {}),
        webhooks.CRON_LINK_KEY: link,
    }
    return given


async def stored_config(cron_id: str, tenant: str) -> tuple[Any, str | None] | None:
    """The tenant's cron's stored config and link; None when it has no such cron (Aegra answers
    404)."""
    async with connection() as conn:
        row = await (
            await conn.execute(
                "SELECT payload -> 'config', payload -> 'config' -> 'metadata' ->> %s FROM crons "
                "WHERE cron_id = %s AND user_id = %s",
                (webhooks.CRON_LINK_KEY, cron_id, tenant),
            )
        ).fetchone()
    return None if row is None else (row[0], row[1])


async def prepare_cron(
    payload: dict[str, Any], tenant: str, *, thread_id: str | None, cron_id: str | None
) -> None:
    """Check the cron's webhook and link the cron (in place); Refused (422) for a webhook it may not
    have. `cron_id` None: a new cron (on `thread_id`, or stateless); else an update of that cron."""
    settings = settings_mod.load()
    if cron_id is None and thread_id is not None and payload.get("multitask_strategy") is None:
        payload["multitask_strategy"] = settings.multitask_strategy
    webhook = payload.get("webhook")
    if webhook is not None:
        await check_webhook(webhook, tenant, settings)
    if cron_id is None:
        payload["config"] = linked(payload.get("config"), str(uuid.uuid4()))
    elif "config" in payload or webhook is not None:
        stored = await stored_config(cron_id, tenant)
        if stored is not None:  # a new config keeps the link; an old cron without one gets one
            config, link = stored
            payload["config"] = linked(
                payload["config"] if "config" in payload else config, link or str(uuid.uuid4())
            )
