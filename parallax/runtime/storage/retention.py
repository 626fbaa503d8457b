"""The retention sweep: what a deployment keeps too long, deleted in small transactions.

See docs/retention.md and docs/internals/postgres.md#the-retention-sweep.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields
from typing import Any

DAY_S = 86_400.0
ACTIVE = "('pending', 'running')"
MAX_BATCHES = 100_000
"""A bound on one sweep's transactions per kind (a sweep always ends)."""


@dataclass(frozen=True)
class Retention:
    """How long each kind is kept, in days (None: forever), and how many rows one transaction
    deletes."""

    threads_days: float | None = None
    checkpoints_days: float | None = None
    traces_days: float | None = None
    dead_letters_days: float | None = None
    webhooks_days: float | None = None
    charges_days: float | None = None
    batch: int = 200


@dataclass
class Swept:
    """What one sweep deleted."""

    threads: int = 0
    checkpoints: int = 0
    traces: int = 0
    dead_letters: int = 0
    webhooks: int = 0
    charges: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


KINDS = tuple(f.name for f in fields(Swept) if f.name != "seconds")
"""Swept's counts (the metric's `kind` label)."""


NO_ACTIVE_RUN = (
    f"NOT EXISTS (SELECT 1 FROM runs r WHERE r.status IN {ACTIVE}"  # nosec B608 # constants only
    " AND r.thread_id = t.thread_id)"
)

CLAIM_OLD_THREADS = f"""
SELECT t.thread_id FROM thread t
WHERE t.updated_at < now() - make_interval(secs => %(age_s)s) AND {NO_ACTIVE_RUN}
ORDER BY t.updated_at LIMIT %(batch)s FOR UPDATE OF t SKIP LOCKED
"""  # nosec B608 # constants only; values are bound

DELETE_THREADS = [
    "DELETE FROM checkpoint_writes WHERE thread_id = ANY(%(ids)s)",
    "DELETE FROM checkpoint_blobs WHERE thread_id = ANY(%(ids)s)",
    "DELETE FROM checkpoints WHERE thread_id = ANY(%(ids)s)",
    "DELETE FROM thread WHERE thread_id = ANY(%(ids)s)",
]

OLD_HISTORY = """
EXISTS (SELECT 1 FROM checkpoints c
        WHERE c.thread_id = t.thread_id
          AND (c.checkpoint ->> 'ts')::timestamptz < now() - make_interval(secs => %(age_s)s)
          AND c.checkpoint_id < (SELECT max(k.checkpoint_id) FROM checkpoints k
                                 WHERE k.thread_id = c.thread_id
                                   AND k.checkpoint_ns = c.checkpoint_ns))
"""

CLAIM_THREADS_WITH_OLD_HISTORY = f"""
SELECT t.thread_id FROM thread t
WHERE {OLD_HISTORY} AND {NO_ACTIVE_RUN}
ORDER BY t.thread_id LIMIT %(batch)s FOR UPDATE OF t SKIP LOCKED
"""  # nosec B608 # constants only; values are bound

DELETE_OLD_HISTORY = """
WITH gone AS (
    DELETE FROM checkpoints c
    WHERE c.thread_id = ANY(%(ids)s)
      AND (c.checkpoint ->> 'ts')::timestamptz < now() - make_interval(secs => %(age_s)s)
      AND c.checkpoint_id < (SELECT max(k.checkpoint_id) FROM checkpoints k
                             WHERE k.thread_id = c.thread_id
                               AND k.checkpoint_ns = c.checkpoint_ns)
    RETURNING c.thread_id, c.checkpoint_ns, c.checkpoint_id
), writes AS (
    DELETE FROM checkpoint_writes w USING gone g
    WHERE w.thread_id = g.thread_id AND w.checkpoint_ns = g.checkpoint_ns
      AND w.checkpoint_id = g.checkpoint_id
)
SELECT count(*) FROM gone
"""

PRUNE_BLOBS = """
DELETE FROM checkpoint_blobs b
WHERE b.thread_id = ANY(%(ids)s)
  AND NOT EXISTS (SELECT 1
                  FROM checkpoints c,
                       jsonb_each_text(c.checkpoint -> 'channel_versions') AS cv(channel, version)
                  WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
                    AND cv.channel = b.channel AND cv.version = b.version)
"""
"""Blobs no remaining checkpoint of their thread refers to (a checkpoint refers to each channel's
version it holds)."""

DELETE_RUN_CHECKPOINTS = """
WITH gone AS (
    DELETE FROM checkpoints
    WHERE thread_id = %(thread_id)s AND metadata ->> 'run_id' = ANY(%(run_ids)s)
    RETURNING thread_id, checkpoint_ns, checkpoint_id
), writes AS (
    DELETE FROM checkpoint_writes w USING gone g
    WHERE w.thread_id = g.thread_id AND w.checkpoint_ns = g.checkpoint_ns
      AND w.checkpoint_id = g.checkpoint_id
)
SELECT count(*) FROM gone
"""

DELETE_RECORDS = """
DELETE FROM store WHERE (prefix, key) IN (
    SELECT prefix, key FROM store
    WHERE ({prefixes}) AND updated_at < now() - make_interval(secs => %(age_s)s)
    LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
"""

DELETE_WEBHOOKS = """
DELETE FROM parallax_webhooks WHERE id IN (
    SELECT w.id FROM parallax_webhooks w
    WHERE w.updated_at < now() - make_interval(secs => %(age_s)s)
      AND (w.status IN ('delivered', 'failed')
           OR (w.status = 'armed' AND NOT EXISTS (
                   SELECT 1 FROM runs r
                   WHERE r.execution_params -> 'run_metadata' ->> 'parallax_webhook' = w.id)))
    LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
"""

OLD_DAY = "day < ((now() AT TIME ZONE 'UTC') - make_interval(secs => %(age_s)s))::date"
DELETE_CHARGES = [
    f"""DELETE FROM parallax_run_charges WHERE run_id IN (
        SELECT run_id FROM parallax_run_charges WHERE {OLD_DAY} LIMIT %(batch)s
        FOR UPDATE SKIP LOCKED)""",  # nosec B608 # constants only; values are bound
    f"""DELETE FROM parallax_tenant_spend WHERE (tenant, day) IN (
        SELECT tenant, day FROM parallax_tenant_spend WHERE {OLD_DAY} LIMIT %(batch)s
        FOR UPDATE SKIP LOCKED)""",  # nosec B608 # constants only; values are bound
]


async def _tables(conn: Any) -> set[str]:
    cursor = await conn.execute(
        "SELECT c FROM unnest(%s::text[]) AS c WHERE to_regclass(c) IS NOT NULL",
        (
            [
                "thread",
                "runs",
                "checkpoints",
                "checkpoint_writes",
                "checkpoint_blobs",
                "store",
                "parallax_webhooks",
                "parallax_run_charges",
                "parallax_tenant_spend",
            ],
        ),
    )
    return {row[0] for row in await cursor.fetchall()}


async def delete_run_checkpoints(conn: Any, thread_id: str, run_ids: list[str]) -> int:
    """Remove what the runs `run_ids` wrote to a thread's checkpoints (a rolled-back run), in one
    transaction; the thread's state is then what it was before them. The checkpoints deleted."""
    async with conn.transaction():
        cursor = await conn.execute(
            DELETE_RUN_CHECKPOINTS, {"thread_id": thread_id, "run_ids": run_ids}
        )
        gone = int((await cursor.fetchone())[0])
        await conn.execute(PRUNE_BLOBS, {"ids": [thread_id]})
    return gone


async def _threads(conn: Any, age_s: float, batch: int) -> int:
    total = 0
    for _ in range(MAX_BATCHES):
        async with conn.transaction():
            ids = [
                row[0]
                for row in await (
                    await conn.execute(CLAIM_OLD_THREADS, {"age_s": age_s, "batch": batch})
                ).fetchall()
            ]
            for statement in DELETE_THREADS:
                if ids:
                    await conn.execute(statement, {"ids": ids})
        total += len(ids)
        if not ids:
            break
    return total


async def _history(conn: Any, age_s: float, batch: int) -> int:
    total = 0
    for _ in range(MAX_BATCHES):
        async with conn.transaction():
            cursor = await conn.execute(
                CLAIM_THREADS_WITH_OLD_HISTORY, {"age_s": age_s, "batch": batch}
            )
            ids = [row[0] for row in await cursor.fetchall()]
            if ids:
                total += int(
                    (
                        await (
                            await conn.execute(DELETE_OLD_HISTORY, {"ids": ids, "age_s": age_s})
                        ).fetchone()
                    )[0]
                )
                await conn.execute(PRUNE_BLOBS, {"ids": ids})
        if not ids:
            break
    return total


async def _delete_until_done(conn: Any, statement: str, params: dict[str, Any]) -> int:
    total = 0
    for _ in range(MAX_BATCHES):
        cursor = await conn.execute(
            statement, params
        )  # autocommit: each batch is its own transaction
        total += cursor.rowcount
        if cursor.rowcount < params["batch"]:
            break
    return total


def _prefixes(*names: str) -> str:
    """`prefix LIKE 'name.%'` for each namespace name (its `_` escaped; `%%` is psycopg's literal
    %)."""
    return " OR ".join(f"prefix LIKE '{name.replace('_', chr(92) + '_')}.%%'" for name in names)


async def sweep(conn: Any, retention: Retention) -> Swept:
    """One sweep on an autocommit psycopg AsyncConnection; kinds whose tables are missing are
    skipped."""
    started, swept = time.perf_counter(), Swept()
    tables = await _tables(conn)
    graph_tables = {
        "thread",
        "runs",
        "checkpoints",
        "checkpoint_writes",
        "checkpoint_blobs",
    } <= tables
    if retention.threads_days is not None and graph_tables:
        swept.threads = await _threads(conn, retention.threads_days * DAY_S, retention.batch)
    if retention.checkpoints_days is not None and graph_tables:
        swept.checkpoints = await _history(
            conn, retention.checkpoints_days * DAY_S, retention.batch
        )
    if "store" in tables:
        for field, days, prefixes in (
            ("traces", retention.traces_days, ("traces", "plan_results", "edit_conversations")),
            ("dead_letters", retention.dead_letters_days, ("dlq",)),
        ):
            if days is not None:
                statement = DELETE_RECORDS.format(prefixes=_prefixes(*prefixes))
                setattr(
                    swept,
                    field,
                    await _delete_until_done(
                        conn, statement, {"age_s": days * DAY_S, "batch": retention.batch}
                    ),
                )
    if retention.webhooks_days is not None and {"parallax_webhooks", "runs"} <= tables:
        swept.webhooks = await _delete_until_done(
            conn,
            DELETE_WEBHOOKS,
            {"age_s": retention.webhooks_days * DAY_S, "batch": retention.batch},
        )
    if (
        retention.charges_days is not None
        and {"parallax_run_charges", "parallax_tenant_spend"} <= tables
    ):
        for statement in DELETE_CHARGES:
            swept.charges += await _delete_until_done(
                conn, statement, {"age_s": retention.charges_days * DAY_S, "batch": retention.batch}
            )
    swept.seconds = round(time.perf_counter() - started, 3)
    return swept


def from_settings(settings: Any) -> Retention:
    """The Retention of PARALLAX_RETAIN_*_DAYS and PARALLAX_SWEEP_BATCH."""
    return Retention(
        threads_days=settings.retain_threads_days,
        checkpoints_days=settings.retain_checkpoints_days,
        traces_days=settings.retain_traces_days,
        dead_letters_days=settings.retain_dead_letters_days,
        webhooks_days=settings.retain_webhooks_days,
        charges_days=settings.retain_charges_days,
        batch=settings.sweep_batch,
    )
