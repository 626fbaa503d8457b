"""Lifespan loop: stop the runs ahead of an "interrupt" or "rollback" cron's run.

See docs/internals/server.md#double-texting-and-webhooks.
"""

from __future__ import annotations

from parallax.runtime import settings as settings_mod
from parallax.runtime import webhooks
from parallax.server import metrics
from parallax.server.caller import key_for_tenant
from parallax.server.connections import connection
from parallax.server.run_requests import ASGIApp, ThreadLock, stop_runs

WAITING = f"""
SELECT r.run_id, r.thread_id, r.user_id, r.execution_params -> 'behavior' ->> 'multitask_strategy'
FROM runs r
WHERE r.status = 'pending' AND r.config -> 'metadata' ? '{webhooks.CRON_LINK_KEY}'
  AND r.execution_params -> 'behavior' ->> 'multitask_strategy' IN ('interrupt', 'rollback')
  AND EXISTS (SELECT 1 FROM runs o
              WHERE o.thread_id = r.thread_id AND o.status IN ('pending', 'running')
              AND (o.created_at, o.run_id) < (r.created_at, r.run_id))
ORDER BY r.created_at LIMIT 20
"""  # nosec B608 # constants only; values are bound
"""Cron runs that wait behind runs their strategy stops."""


async def stop_runs_before_cron_runs(app: ASGIApp) -> int:
    """Stop the runs in flight ahead of each waiting interrupt/rollback cron run; how many cron runs
    were served."""
    async with connection() as conn:
        rows = await (await conn.execute(WAITING)).fetchall()
    served = 0
    for run_id, thread_id, tenant, strategy in rows:
        served += await serve(app, run_id, thread_id, tenant, strategy)
    return served


async def serve(app: ASGIApp, run_id: str, thread_id: str, tenant: str, strategy: str) -> int:
    key = key_for_tenant(tenant)
    if key is None:  # the tenant lost its keys: its run waits, as "enqueue"
        return 0
    wait_s = settings_mod.load().double_text_wait_s
    lock = ThreadLock(thread_id)
    if not await lock.acquire(wait_s + 10):
        return 0  # a double-text of this thread is under way; looked at again next time
    try:
        in_flight = await lock.active_runs(tenant) or []
        ahead = in_flight[: in_flight.index(run_id)] if run_id in in_flight else []
        if not ahead:
            return 0
        metrics.DOUBLE_TEXTS.labels(strategy=strategy).inc()
        await stop_runs(app, {"x-api-key": key}, lock, ahead, strategy, wait_s)
        return 1
    finally:
        await lock.release()
