"""Webhooks and double-texting on the runs crons create, set up as the cron is created or changed.

A cron's runs pass no HTTP run route (server/run_requests.py): Aegra's scheduler inserts them
itself, and so does the cron's creation for its first run. What reaches them is the cron's stored
payload: Aegra copies its `config` and `multitask_strategy` onto every run it creates (not its
`webhook`, nor its metadata). So admission (server/admission.py), on POST /runs/crons, POST
/threads/{id}/runs/crons and PATCH /runs/crons/{id}, once the cron's fields are checked as a run's:
- checks `webhook` as on a run (runtime/webhooks.py: http(s), every address public or allowed,
  the tenant has a secret; 422 and no cron otherwise); Aegra stores it in the cron's payload;
- gives a thread-bound cron without `multitask_strategy` PARALLAX_MULTITASK_STRATEGY, as a run
  request gets;
- puts a link of its own in the cron's config (`config.metadata.parallax_cron`, kept when an
  update replaces the config), which every run of the cron carries. The trigger
  `parallax_cron_run` (runtime/storage/platform_schema.py) finds the cron by it as Aegra inserts
  the run: it arms the webhook and enforces "reject"; "enqueue" holds for every run anyway
  (the claim trigger), and server/background_loops.py stops the runs in flight for "interrupt" and
  "rollback" crons.
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
    given["metadata"] = {**(metadata if isinstance(metadata, dict) else {}), webhooks.CRON_LINK_KEY: link}
    return given


async def stored_config(cron_id: str, tenant: str) -> tuple[Any, str | None] | None:
    """The tenant's cron's stored config and link; None when it has no such cron (Aegra answers 404)."""
    async with connection() as conn:
        row = await (await conn.execute(
            "SELECT payload -> 'config', payload -> 'config' -> 'metadata' ->> %s FROM crons "
            "WHERE cron_id = %s AND user_id = %s", (webhooks.CRON_LINK_KEY, cron_id, tenant))).fetchone()
    return None if row is None else (row[0], row[1])


async def prepare_cron(payload: dict[str, Any], tenant: str, *, thread_id: str | None, cron_id: str | None) -> None:
    """Check the cron's webhook and link the cron (in place); Refused (422) for a webhook it may not have.
    `cron_id` None: a new cron (on `thread_id`, or stateless); else an update of that cron."""
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
            payload["config"] = linked(payload["config"] if "config" in payload else config, link or str(uuid.uuid4()))
