"""The replica's small pool of autocommit PostgreSQL connections, beside Aegra's own.

Why its own module: the run and cron routes (server/run_requests.py, server/cron_requests.py), the cron
double-texts loop (server/cron_double_texts.py) and the lifespan's loops (server/platform.py) all read
Aegra's tables and take advisory locks through it, and the lifespan starts loops that build on those
routes: the pool sits below all of them, so none has to import another's module for a connection.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from parallax.runtime.storage.postgres import conninfo

_pool: Any = None


@asynccontextmanager
async def connection() -> AsyncIterator[Any]:
    """An autocommit connection of this replica's small pool (opened on first use)."""
    global _pool
    if _pool is None:
        from psycopg_pool import AsyncConnectionPool

        _pool = AsyncConnectionPool(conninfo(os.environ["DATABASE_URL"]), min_size=1, max_size=4,
                                    kwargs={"autocommit": True}, open=False)
        await _pool.open()
    async with _pool.connection() as conn:
        yield conn


async def close() -> None:
    """Close the pool if it was opened (the lifespan's end); the next `connection()` opens a new one."""
    global _pool
    if _pool is not None:
        pool, _pool = _pool, None
        await pool.close()
