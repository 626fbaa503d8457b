"""The replica's lifespan loops: dispatcher, webhook deliveries, cron double-texts, sweeps.

See docs/internals/server.md#the-replicas-lifespan-and-background-loops.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

from parallax.runtime import settings as settings_mod
from parallax.runtime import webhooks
from parallax.runtime.startup import freeze_startup_objects
from parallax.runtime.storage import retention
from parallax.runtime.storage.postgres import LockTimeout, advisory_lock
from parallax.server import metrics
from parallax.server.connections import close, connection
from parallax.server.cron_double_texts import stop_runs_before_cron_runs

log = logging.getLogger("parallax.platform")

HELD_RUNS = """
SELECT r.run_id, r.thread_id, r.execution_params FROM runs r
WHERE r.status = 'pending' AND r.claimed_by IS NULL AND r.created_at < now() - interval '2 seconds'
  AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.thread_id = r.thread_id AND o.run_id <> r.run_id
                  AND (o.status = 'running'
                       OR (o.status = 'pending'
                           AND (o.created_at, o.run_id) < (r.created_at, r.run_id))))
ORDER BY r.created_at LIMIT 100
"""
"""Pending runs that are next on a free thread (the trigger would let a worker claim them now)."""


async def dispatch_held_runs() -> int:
    """Hand the runs that are next on a free thread to a worker; how many were handed over."""
    from aegra_api.services.executor import executor

    async with connection() as conn:
        rows = await (await conn.execute(HELD_RUNS)).fetchall()
    if not rows:
        return 0
    if type(executor).__name__ == "WorkerExecutor":
        from aegra_api.core.redis_manager import redis_manager
        from aegra_api.settings import settings as aegra

        client, queue, handed = redis_manager.get_client(), aegra.worker.WORKER_QUEUE_KEY, 0
        for run_id, _thread_id, _params in rows:
            if await client.lpos(queue, run_id) is not None:
                continue  # waiting for a worker already
            if await client.set(
                f"{aegra.redis.REDIS_CHANNEL_PREFIX}parallax-dispatched:{run_id}",
                "1",
                nx=True,
                ex=10,
            ):
                await client.rpush(queue, run_id)
                handed += 1
        return handed
    from aegra_api.core.active_runs import active_runs
    from aegra_api.models.run_job import RunJob

    handed = 0
    for run_id, thread_id, params in rows:
        if run_id not in active_runs and params:
            await executor.submit(
                RunJob.from_run_orm(
                    SimpleNamespace(run_id=run_id, thread_id=thread_id, execution_params=params)
                )
            )
            handed += 1
    return handed


def webhook_deliveries() -> webhooks.Deliveries:
    """The replica's webhook attempts, on its pool, counted in the webhooks metric as each ends."""
    return webhooks.Deliveries(
        connection,
        webhooks.replica_name(),
        on_outcome=lambda outcome: metrics.WEBHOOKS.labels(outcome=outcome).inc(),
    )


async def sweep_once() -> retention.Swept | None:
    """One retention sweep unless another replica is sweeping (None then). It runs on the lock's own
    connection, not one of the replica's pool: a sweep of many batches would hold one of its 4
    connections for as long.
    """
    settings = settings_mod.load()
    try:
        async with advisory_lock(os.environ["DATABASE_URL"], "sweep", timeout=0) as conn:
            swept = await retention.sweep(conn, retention.from_settings(settings))
    except LockTimeout:
        return None
    for kind in retention.KINDS:
        metrics.SWEPT.labels(kind=kind).inc(getattr(swept, kind))
    if any(getattr(swept, kind) for kind in retention.KINDS):
        log.info("retention sweep: %s", swept.as_dict())
    return swept


async def sweep_store_items() -> int:
    """Delete the expired store items (server/store_ttl.py), counted in
    parallax_swept_total{kind="store_items"}."""
    from parallax.server import store_ttl  # Aegra's routes: imported where a database serves them

    swept = await store_ttl.sweep_expired()
    metrics.SWEPT.labels(kind="store_items").inc(swept)
    if swept:
        log.info("store ttl sweep: %d items", swept)
    return swept


async def every(
    seconds: Callable[[], float], work: Callable[[], Awaitable[Any]], name: str
) -> None:
    """Run `work` every `seconds()` until cancelled; an error is logged and the loop goes on."""
    while True:
        await asyncio.sleep(seconds())
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a database or Redis hiccup must not end the loop
            log.exception("%s failed; trying again later", name)


@asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """Runs inside Aegra's lifespan, after it has loaded the graphs: so the imported modules and
    compiled graphs are frozen out of the garbage collector's walks here, as the CLI does once its
    graph is compiled (runtime/startup.py: a replica's fan-out pays that CPU per branch otherwise).
    """
    freeze_startup_objects()
    if not os.environ.get("DATABASE_URL"):
        yield
        return
    settings = settings_mod.load()
    webhooks.policy_from(
        settings
    )  # a bad secret list or network fails the start, not every delivery
    deliveries = webhook_deliveries()
    loops = [
        asyncio.create_task(every(lambda: 1.0, dispatch_held_runs, "dispatcher")),
        asyncio.create_task(
            every(
                lambda: 0.5,
                lambda: deliveries.round(webhooks.policy_from(settings_mod.load())),
                "webhook delivery",
            )
        ),
        asyncio.create_task(
            every(lambda: 1.0, lambda: stop_runs_before_cron_runs(app), "cron double-texts")
        ),
    ]
    if settings.sweep_interval_s > 0:
        loops.append(
            asyncio.create_task(
                every(lambda: settings_mod.load().sweep_interval_s, sweep_once, "sweep")
            )
        )
    from parallax.server import store_ttl  # Aegra's routes: imported where a database serves them

    if (store_sweep_s := store_ttl.current().sweep_interval_minutes * 60) > 0:
        loops.append(
            asyncio.create_task(every(lambda: store_sweep_s, sweep_store_items, "store ttl sweep"))
        )
    try:
        yield
    finally:
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        await deliveries.close()
        await close()
