"""Runs picked up right after a database restart wait for Aegra's LangGraph pool instead of failing.

Why: Aegra's checkpointer and store share one psycopg_pool `AsyncConnectionPool` (aegra_api/core/
database.py, as pinned), which waits at most its `timeout` (psycopg_pool's default, 30 s) for a
connection. While PostgreSQL is down the pool keeps reconnecting with exponential backoff (1 s,
doubled after each failure: psycopg_pool's AttemptWithBackoff), so after an outage of T seconds its
next attempt can be up to about T seconds after the database is back. On a loaded machine a restart
took 17-20 s (bench.faults, db_restart), and a run a worker picked up meanwhile failed at its first
checkpoint read with "PoolTimeout: couldn't get a connection after 30.00 sec": Aegra ended it `error`,
a run lost to a fault the deployment had survived. With WAIT_S the run waits for the pool's next
attempt (outages up to about a minute); its lease is renewed meanwhile by Aegra's heartbeat, which uses
its own (SQLAlchemy) pool, and the fence reads leases over its own connection.

How: a wrap of Aegra's `DatabaseManager.initialize` sets the pool's `timeout` once the pool is open (made at start
by server/aegra_patches.py, before Aegra's lifespan opens it); made later, after the pool opened, it sets it on
the open pool at once.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

WAIT_S = 120.0
"""How long a graph run waits for a connection of Aegra's LangGraph pool."""

log = logging.getLogger("parallax.db_pool")


def ride_out_restarts(manager: Any) -> None:
    """Give the LangGraph pool of Aegra's database manager WAIT_S as the time a connection request may wait (once it
    is open; a longer wait someone chose is kept)."""
    pool = getattr(manager, "lg_pool", None)
    if pool is not None and getattr(pool, "timeout", WAIT_S) < WAIT_S:
        pool.timeout = WAIT_S
        log.info("LangGraph pool: connection requests wait up to %g s (database restarts)", WAIT_S)


def install() -> None:
    """Wrap `DatabaseManager.initialize`, and set the wait on Aegra's pool if it is open already; a second call changes
    nothing."""
    from aegra_api.core.database import DatabaseManager, db_manager

    original = DatabaseManager.initialize
    if not getattr(original, "parallax_rides_out", False):

        @functools.wraps(original)
        async def initialize(self: Any) -> None:
            await original(self)
            ride_out_restarts(self)

        initialize.parallax_rides_out = True  # type: ignore[attr-defined]
        DatabaseManager.initialize = initialize
    ride_out_restarts(db_manager)
