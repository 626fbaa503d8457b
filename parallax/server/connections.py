"""The replica's two small pools of autocommit PostgreSQL connections, beside Aegra's own.

- `connection()`: short queries (admission's checks, the lifespan's loops, Aegra's tables read by
  Parallax). Nobody holds one across a sleep: a loop that waits takes one per look and gives it back.
- `thread_lock(thread_id, timeout_s)`: the per-thread double-texting lock (server/run_requests.py,
  server/cron_double_texts.py), a PostgreSQL session advisory lock held on a connection of its
  own pool for as long as the double-text takes (stopping the runs in flight, storing the new run).
  Its own pool, so that waiting turns never starve the short queries; bounded (LOCK_POOL_SIZE per
  replica), so a burst of double-texts costs a bounded number of connections instead of one new
  connection per request. The lock is the two-key lock (THREAD_LOCK_CLASS, hashtext(thread_id)) that
  the trigger on a cron's run takes too (runtime/storage/platform_schema.py). It is taken with a
  blocking `pg_advisory_lock` under `lock_timeout`, so a waiter sleeps in PostgreSQL, not in a
  polling loop; a waiter blocks a concurrent `CREATE INDEX CONCURRENTLY` (migrations, only at
  start-up) for at most its timeout.

Why its own module: the run and cron routes, the cron double-texts loop and the lifespan's loops all
use these pools, and the lifespan starts loops that build on those routes: the pools sit below all of
them, so none has to import another's module for a connection.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from parallax.runtime.storage.platform_schema import THREAD_LOCK_CLASS
from parallax.runtime.storage.postgres import conninfo

POOL_SIZE = 4
LOCK_POOL_SIZE = 8
"""Double-texts one replica serves at once (each holds one connection while it waits its turn and acts)."""

_pools: dict[str, Any] = {}


class LockBusy(Exception):
    """No turn on the thread within the timeout, or no lock connection free on this replica."""


async def _pool(name: str, size: int) -> Any:
    pool = _pools.get(name)
    if pool is None:
        from psycopg_pool import AsyncConnectionPool

        pool = _pools[name] = AsyncConnectionPool(conninfo(os.environ["DATABASE_URL"]), min_size=1, max_size=size,
                                                  kwargs={"autocommit": True}, open=False, name=f"parallax-{name}")
        await pool.open()
    return pool


@asynccontextmanager
async def connection() -> AsyncIterator[Any]:
    """An autocommit connection of this replica's small pool (opened on first use)."""
    pool = await _pool("queries", POOL_SIZE)
    async with pool.connection() as conn:
        yield conn


@asynccontextmanager
async def thread_lock(thread_id: str, timeout_s: float) -> AsyncIterator[Any]:
    """Hold the thread's double-texting lock (all replicas) and yield its connection; LockBusy after `timeout_s`."""
    from psycopg import errors
    from psycopg_pool import PoolTimeout

    pool = await _pool("locks", LOCK_POOL_SIZE)
    try:
        async with pool.connection(timeout=timeout_s) as conn:
            await conn.execute(f"SET lock_timeout = {int(timeout_s * 1000)}")
            try:
                await conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (THREAD_LOCK_CLASS, thread_id))
            except errors.LockNotAvailable:
                raise LockBusy(thread_id) from None
            finally:
                await conn.execute("RESET lock_timeout")
            try:
                yield conn
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (THREAD_LOCK_CLASS, thread_id))
    except PoolTimeout:
        raise LockBusy(thread_id) from None


async def close() -> None:
    """Close the pools that were opened (the lifespan's end); the next use opens new ones."""
    while _pools:
        _, pool = _pools.popitem()
        await pool.close()
