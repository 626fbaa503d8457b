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
"""

from __future__ import annotations

import logging

WAIT_S = 120.0
"""How long a graph run waits for a connection of Aegra's LangGraph pool."""

log = logging.getLogger("parallax.db_pool")


def ride_out_restarts() -> None:
    """Give Aegra's LangGraph pool WAIT_S as the time a connection request may wait (when it is open)."""
    try:
        from aegra_api.core.database import db_manager
    except ImportError:  # not under Aegra
        return
    pool = getattr(db_manager, "lg_pool", None)
    if pool is not None and getattr(pool, "timeout", WAIT_S) < WAIT_S:
        pool.timeout = WAIT_S
        log.info("LangGraph pool: connection requests wait up to %g s (database restarts)", WAIT_S)
