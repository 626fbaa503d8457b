"""The PostgreSQL store and its advisory commit lock, hammered from several connections at once.

Each writer has its own event loop, connection pool and lock connections, as a replica on
another host would: only PostgreSQL can serialise them. Needs the postgres extra and a
PostgreSQL server (run with the server venv, like test_deploy.py).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from testkit.aegra_cluster import Cluster, missing_services

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
WRITERS, COMMITS = 4, 5


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    pytest.importorskip("psycopg", reason="needs the postgres extra (the server venv)")
    pytest.importorskip(
        "langgraph.store.postgres", reason="needs the postgres extra (the server venv)"
    )
    if down := [m for m in missing_services() if m.startswith("PostgreSQL")]:
        pytest.fail("PostgreSQL is needed: " + "; ".join(down))
    cluster = Cluster(tmp_path_factory.mktemp("pg")).create()
    try:
        yield cluster.database_url
    finally:
        cluster.close()


def at_once(work) -> None:
    """Run `work(n)` (a coroutine function) for every writer n, each in its own thread and event
    loop."""
    errors = []

    def run(n: int) -> None:
        try:
            asyncio.run(work(n))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors


def test_playbook_commits_from_many_connections_lose_nothing(database):
    from parallax.runtime.storage.postgres import PostgresCommitLock, open_postgres_store
    from parallax.runtime.storage.stores import lock_for, playbooks_in
    from parallax.state.playbook import Operation

    async def writer(n: int) -> None:
        async with open_postgres_store(database) as store:
            assert isinstance(lock_for(store), PostgresCommitLock)
            playbooks = playbooks_in(store, "acme")
            for i in range(
                COMMITS
            ):  # every writer commits against v0: all but the first must re-apply
                await playbooks.commit(
                    "shared",
                    0,
                    [Operation(op="add", text=f"Writer {n} rule {i}: check the units.")],
                    f"writer-{n}",
                )

    at_once(writer)

    async def read():
        async with open_postgres_store(database) as store:
            playbooks = playbooks_in(store, "acme")
            return await playbooks.history("shared"), await playbooks.head("shared")

    history, head = asyncio.run(read())
    assert [(v.version, v.parent) for v in history] == [
        (v, v - 1) for v in range(1, WRITERS * COMMITS + 1)
    ]
    assert sorted(i.text for i in head.active) == sorted(
        f"Writer {n} rule {i}: check the units." for n in range(WRITERS) for i in range(COMMITS)
    )


def test_label_changes_from_many_connections_all_count(database):
    """The gray release's trial counts are read-modify-write under the same lock: none may be
    lost."""
    from parallax.runtime.storage.postgres import open_postgres_store
    from parallax.runtime.storage.stores import playbooks_in

    def count(labels: dict) -> None:
        labels["events"].append({"label": "trial"})

    async def writer(n: int) -> None:
        async with open_postgres_store(database) as store:
            labels = playbooks_in(store, "acme").labels("counted")
            for _ in range(COMMITS):
                await labels.change(count)

    at_once(writer)

    async def read():
        async with open_postgres_store(database) as store:
            return await playbooks_in(store, "acme").labels("counted").get()

    assert len(asyncio.run(read())["events"]) == WRITERS * COMMITS


def test_thread_lock_is_the_triggers_holders_take_turns_and_a_timed_out_waiter_keeps_no_connection(
    database, monkeypatch
):
    """The server's per-thread lock is one advisory lock, the two-key lock (THREAD_LOCK_CLASS,
    hashtext(thread)) that the cron-run trigger takes in SQL: a second holder waits for the first, a
    holder in SQL (a transaction, as the trigger's) and a ThreadLock exclude each other, and a
    waiter that gives up gets False (or advisory_lock's timeout error) and keeps no connection."""
    import psycopg

    from parallax.runtime.storage.platform_schema import THREAD_LOCK_CLASS
    from parallax.runtime.storage.postgres import LockTimeout, advisory_lock, conninfo
    from parallax.server import connections
    from parallax.server.run_requests import ThreadLock

    monkeypatch.setenv("DATABASE_URL", database)
    key = (THREAD_LOCK_CLASS, "contended")

    def others() -> int:
        """Connections to the test database other than this one."""
        with psycopg.connect(conninfo(database)) as conn:
            return conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            ).fetchone()[0]

    async def settled(expected: int) -> int:
        """The count once closed connections' backends have gone (they exit a moment after the
        client closes)."""
        for _ in range(50):
            if (count := others()) == expected:
                break
            await asyncio.sleep(0.05)
        return count

    async def contend() -> None:
        first, second = ThreadLock("contended"), ThreadLock("contended")
        assert await first.acquire(5)
        assert (await (await first.conn.execute("SELECT 1")).fetchone())[
            0
        ] == 1  # the checks run on its connection
        waiting = asyncio.create_task(second.acquire(10))
        await asyncio.sleep(0.5)
        assert not waiting.done()  # the second holder waits while the first holds

        late = ThreadLock("contended")
        assert await late.acquire(0.2) is False
        assert late.conn is None
        with pytest.raises(
            LockTimeout,
            match=r"timed out after 0\.2s waiting for the lock 'contended \(class 0x70617274\)'",
        ):
            async with advisory_lock(database, key, 0.2):
                pass
        with psycopg.connect(
            conninfo(database), autocommit=True
        ) as conn:  # the trigger's spelling of the lock
            assert (
                conn.execute("SELECT pg_try_advisory_xact_lock(%s, hashtext(%s))", key).fetchone()[
                    0
                ]
                is False
            )
        pool = connections._pools[
            "locks"
        ].get_stats()  # the lock's own bounded pool (server/connections.py)
        assert (
            pool["pool_size"] - pool["pool_available"] == 2
        )  # the two holders'; neither waiter kept one
        assert (
            await settled(pool["pool_size"]) == pool["pool_size"]
        )  # and no connection outside the pool

        await first.release()
        assert await asyncio.wait_for(waiting, 5) is True
        assert first.conn is None and second.conn is not None
        await second.release()
        await second.release()  # the middleware releases twice (once Aegra answers, and at the end)

        with psycopg.connect(
            conninfo(database)
        ) as conn:  # a transaction holds it, as the trigger's does: no turn
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", key)
            assert await asyncio.wait_for(late.acquire(0.2), 5) is False
        assert await late.acquire(5)  # the transaction has ended: free
        await late.release()
        await connections.close()  # the lifespan's end closes the pools
        assert await settled(0) == 0

    asyncio.run(contend())
