"""The lease fence head-on, on PostgreSQL (parallax/server/lease_fence.py,
runtime/storage/lease_tables.py): a throwaway database with the two columns of Aegra's `runs` table
and the store's table the fence reads, the fence's migration, and claims made the way Aegra's worker
and reaper make them.

Needs the server venv (prometheus-client) and PostgreSQL; `.ci/run` runs it with the deploy tests.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from testkit.aegra_cluster import PG_ADMIN

pytestmark = [pytest.mark.integration, pytest.mark.deploy]

TABLES = """
CREATE TABLE runs (run_id text PRIMARY KEY, status text NOT NULL, claimed_by text,
                   lease_expires_at timestamptz);
CREATE TABLE store (prefix text NOT NULL, key text NOT NULL, value jsonb NOT NULL,
                    created_at timestamptz DEFAULT now(), updated_at timestamptz DEFAULT now(),
                    PRIMARY KEY (prefix, key));
"""


@pytest.fixture
def db(monkeypatch):
    pytest.importorskip(
        "prometheus_client", reason="needs the server venv (pip install -e '.[server,test]')"
    )
    import psycopg

    from parallax.runtime.storage.lease_tables import migrate_sync

    name = f"parallax_fence_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(TABLES)
            migrate_sync(conn)
            migrate_sync(conn)  # idempotent: every replica runs it at start-up
            monkeypatch.setenv("DATABASE_URL", url)
            yield conn
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def claim(conn, run_id: str, worker: str, lease_s: int = 30) -> None:
    """What Aegra's worker does on a claim (and the reaper before it, on a takeover)."""
    conn.execute(
        "UPDATE runs SET claimed_by = NULL, status = 'pending' WHERE run_id = %s", (run_id,)
    )
    conn.execute(
        "UPDATE runs SET claimed_by = %s, status = 'running', lease_expires_at = now() +"
        " make_interval(secs => %s) WHERE run_id = %s",
        (worker, lease_s, run_id),
    )


async def guarded(
    monkeypatch, run_id: str, record: dict, what: str = "model call", timeout_s: float = 4.0
) -> bool:
    """True if the fence let `what` through within `timeout_s`."""
    from parallax.server import lease_fence

    monkeypatch.setattr(lease_fence, "_fence_record", lambda: (run_id, record))
    try:
        async with asyncio.timeout(timeout_s):
            await lease_fence.check(what)
        return True
    except TimeoutError:
        return False


async def test_a_run_claimed_by_another_replica_is_fenced_and_its_stale_writes_refused(
    db, monkeypatch
):
    from parallax.runtime import lease_check
    from parallax.server import lease_fence

    run_id = str(uuid.uuid4())
    db.execute("INSERT INTO runs (run_id, status) VALUES (%s, 'pending')", (run_id,))
    claim(db, run_id, lease_fence.process_prefix() + "0")
    execution: dict = {}  # this execution's fence record (Aegra copies one per execution)
    assert await guarded(monkeypatch, run_id, execution)
    assert execution["generation"] == 1 and execution["claimed_by"].endswith("-worker-0")
    token = lease_fence.token()
    assert token == {"run": run_id, "generation": 1}

    # a stamped write while the lease is held lands
    value = json.dumps({"answer": "42", lease_check.LEASE_FIELD: token})
    db.execute("INSERT INTO store (prefix, key, value) VALUES ('traces.acme', 't1', %s)", (value,))

    # the lease runs out, another replica's reaper and worker take the run over: generation 2
    db.execute(
        "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = %s",
        (run_id,),
    )
    execution["trusted_until"] = 0.0  # (the 30 s this execution saw have passed)
    claim(db, run_id, "otherhost-4242-worker-1")
    assert (
        db.execute(
            "SELECT generation FROM parallax_run_leases WHERE run_id = %s", (run_id,)
        ).fetchone()[0]
        == 2
    )
    assert not await guarded(
        monkeypatch, run_id, execution, timeout_s=2.5
    )  # no model call from the old execution

    # a write the old execution had sent before the takeover arrives now: refused and recorded
    late = json.dumps({"answer": "stale", lease_check.LEASE_FIELD: token})
    db.execute(
        "INSERT INTO store (prefix, key, value) VALUES ('traces.acme', 't1', %s) "
        "ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
        (late,),
    )
    assert db.execute("SELECT value->>'answer' FROM store WHERE key = 't1'").fetchone()[0] == "42"
    refused = db.execute(
        "SELECT run_id, generation, current_generation FROM parallax_fenced_writes"
    ).fetchall()
    assert refused == [(run_id, 1, 2)]

    # the new holder writes the same record again: it lands, and the handover is on record
    fresh = json.dumps({"answer": "42", lease_check.LEASE_FIELD: {"run": run_id, "generation": 2}})
    db.execute(
        "INSERT INTO store (prefix, key, value) VALUES ('traces.acme', 't1', %s) "
        "ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
        (fresh,),
    )
    assert (
        db.execute("SELECT value->'_lease'->>'generation' FROM store WHERE key = 't1'").fetchone()[
            0
        ]
        == "2"
    )
    assert db.execute(
        "SELECT generation, previous_generation FROM parallax_handovers"
    ).fetchall() == [(2, 1)]

    # a new execution in this process (the run claimed back by one of its workers) gets the new
    # token
    claim(db, run_id, lease_fence.process_prefix() + "2")
    again: dict = {}
    assert await guarded(monkeypatch, run_id, again) and again["generation"] == 3
    assert not await guarded(
        monkeypatch, run_id, execution, timeout_s=1.5
    )  # the old one is still fenced


async def test_a_run_nobody_leases_is_not_fenced_and_an_unreachable_database_holds_calls_back(
    db, monkeypatch
):
    from parallax.server import lease_fence

    local = str(uuid.uuid4())  # a replica without Redis runs in process: no claim, no lease
    db.execute("INSERT INTO runs (run_id, status) VALUES (%s, 'running')", (local,))
    assert await guarded(monkeypatch, local, {})

    run_id = str(uuid.uuid4())
    db.execute("INSERT INTO runs (run_id, status) VALUES (%s, 'pending')", (run_id,))
    claim(db, run_id, lease_fence.process_prefix() + "0", lease_s=30)
    execution: dict = {}
    assert await guarded(monkeypatch, run_id, execution)
    monkeypatch.setenv(
        "DATABASE_URL", "postgresql://postgres@127.0.0.1:1/nowhere"
    )  # the database is gone
    lease_fence._conns.clear()
    assert await guarded(
        monkeypatch, run_id, execution, timeout_s=1.0
    )  # a lease seen 30 s ahead still holds
    execution["trusted_until"] = 0.0  # ... until it may have run out: then nothing is called
    assert not await guarded(monkeypatch, run_id, execution, timeout_s=2.0)
