"""A run picked up right after a database restart waits for Aegra's LangGraph pool (server/db_pool.py)."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace

from parallax.server import db_pool


def test_the_pools_wait_is_raised_to_ride_out_its_reconnect_backoff(monkeypatch):
    pool = SimpleNamespace(timeout=30.0)  # psycopg_pool's default: shorter than its backoff after a long outage
    database = ModuleType("aegra_api.core.database")
    database.db_manager = SimpleNamespace(lg_pool=pool)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aegra_api.core.database", database)
    db_pool.ride_out_restarts()
    assert pool.timeout == db_pool.WAIT_S == 120.0
    pool.timeout = 300.0  # a longer wait someone chose is kept
    db_pool.ride_out_restarts()
    assert pool.timeout == 300.0
    database.db_manager = SimpleNamespace(lg_pool=None)  # type: ignore[attr-defined]
    db_pool.ride_out_restarts()  # before the pool is open: nothing to do
