"""Aegra patch: runs picked up right after a database restart wait for the pool instead of failing.

See docs/internals/server.md#the-langgraph-pools-timeout-db_poolpy.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

WAIT_S = 120.0
"""How long a graph run waits for a connection of Aegra's LangGraph pool."""

log = logging.getLogger("parallax.db_pool")


def ride_out_restarts(manager: Any) -> None:
    """Give the LangGraph pool of Aegra's database manager WAIT_S as the time a connection request
    may wait (once it is open; a longer wait someone chose is kept)."""
    pool = getattr(manager, "lg_pool", None)
    if pool is not None and getattr(pool, "timeout", WAIT_S) < WAIT_S:
        pool.timeout = WAIT_S
        log.info("LangGraph pool: connection requests wait up to %g s (database restarts)", WAIT_S)


def install() -> None:
    """Wrap `DatabaseManager.initialize`, and set the wait on Aegra's pool if it is open already; a
    second call changes nothing."""
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
