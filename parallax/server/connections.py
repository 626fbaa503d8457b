"""The replica's two small pools of autocommit PostgreSQL connections, beside Aegra's.

One for short queries, one for the per-thread double-texting lock. See
docs/internals/server.md#connections.
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
"""Double-texts one replica serves at once (each holds one connection while it waits its turn and
acts)."""

_pools: dict[str, Any] = {}


class LockBusy(Exception):
    """No turn on the thread within the timeout, or no lock connection free on this replica."""


async def _pool(name: str, size: int) -> Any:
    pool = _pools.get(name)
    if pool is None:
        from psycopg_pool import AsyncConnectionPool

        pool = _pools[name] = AsyncConnectionPool(
            conninfo(os.environ["DATABASE_URL"]),
            min_size=1,
            max_size=size,
            kwargs={"autocommit": True},
            open=False,
            name=f"parallax-{name}",
        )
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
    """Hold the thread's double-texting lock (all replicas) and yield its connection; LockBusy after
    `timeout_s`."""
    from psycopg import errors
    from psycopg_pool import PoolTimeout

    pool = await _pool("locks", LOCK_POOL_SIZE)
    try:
        async with pool.connection(timeout=timeout_s) as conn:
            await conn.execute(f"SET lock_timeout = {int(timeout_s * 1000)}")
            try:
                await conn.execute(
                    "SELECT pg_advisory_lock(%s, hashtext(%s))", (THREAD_LOCK_CLASS, thread_id)
                )
            except errors.LockNotAvailable:
                raise LockBusy(thread_id) from None
            finally:
                await conn.execute("RESET lock_timeout")
            try:
                yield conn
            finally:
                await conn.execute(
                    "SELECT pg_advisory_unlock(%s, hashtext(%s))", (THREAD_LOCK_CLASS, thread_id)
                )
    except PoolTimeout:
        raise LockBusy(thread_id) from None


async def close() -> None:
    """Close the pools that were opened (the lifespan's end); the next use opens new ones."""
    while _pools:
        _, pool = _pools.popitem()
        await pool.close()
