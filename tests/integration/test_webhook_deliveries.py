"""Webhook attempts on a real outbox (PostgreSQL): one receiver that stalls holds back no other
delivery, and no connection of the replica's pool is held while a receiver thinks.

The outbox table is the deployment's own (runtime/storage/platform_schema.py), in a database of its
own; the rows are made due by hand, as the trigger on Aegra's runs table would. Run with the server
venv (psycopg), like test_postgres_store.py.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

import pytest

from parallax.runtime import webhooks
from testkit.aegra_cluster import Cluster, missing_services
from testkit.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.integration, pytest.mark.deploy]


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    psycopg = pytest.importorskip("psycopg", reason="needs the postgres extra (the server venv)")
    if down := [m for m in missing_services() if m.startswith("PostgreSQL")]:
        pytest.fail("PostgreSQL is needed: " + "; ".join(down))
    from parallax.runtime.storage.platform_schema import DDL

    cluster = Cluster(tmp_path_factory.mktemp("pg")).create()
    try:
        with psycopg.connect(cluster.database_url, autocommit=True) as conn:
            conn.execute(
                DDL.split("CREATE OR REPLACE FUNCTION")[0]
            )  # the outbox table alone (no Aegra tables here)
        yield cluster.database_url
    finally:
        cluster.close()


class Pool:
    """A stand-in for the replica's pool (server/connections.py) that counts connections checked out
    at once."""

    def __init__(self, url: str) -> None:
        self.url, self.out, self.most = url, 0, 0

    @asynccontextmanager
    async def connection(self):
        import psycopg

        self.out += 1
        self.most = max(self.most, self.out)
        try:
            async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                yield conn
        finally:
            self.out -= 1


def due(database: str, rows: dict[str, str]) -> None:
    import psycopg

    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DELETE FROM parallax_webhooks")
        for webhook_id, url in rows.items():
            conn.execute(
                "INSERT INTO parallax_webhooks (id, tenant, url, status, payload, next_attempt_at) "
                "VALUES (%s, 'acme', %s, 'due', '{\"status\": \"success\"}', now())",
                (webhook_id, url),
            )


def statuses(database: str) -> dict[str, tuple[str, int, str | None]]:
    import psycopg

    with psycopg.connect(database, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT id, status, attempts, last_error FROM parallax_webhooks"
        ).fetchall()
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


POLICY = webhooks.DeliveryPolicy(
    secrets={"acme": "acme-secret-0123456789"},
    allowed=tuple(webhooks.parse_networks("127.0.0.0/8")),
    timeout_s=4.0,
    max_attempts=3,
    backoff_s=30.0,
    backoff_max_s=60.0,
)


async def test_a_stalled_receiver_holds_back_no_other_delivery_and_no_pool_connection(database):
    with WebhookReceiver(answers=["hang"]) as stalled, WebhookReceiver() as prompt:
        due(database, {"to-stalled": stalled.url, "to-prompt": prompt.url})
        pool, outcomes = Pool(database), []
        deliveries = webhooks.Deliveries(pool.connection, "replica-a", on_outcome=outcomes.append)
        started = time.monotonic()
        assert await deliveries.round(POLICY) == 2
        assert time.monotonic() - started < 2.0  # the round starts both and waits for neither
        while "delivered" not in outcomes and time.monotonic() - started < POLICY.timeout_s:
            await asyncio.sleep(0.05)
        delivered_after = time.monotonic() - started
        recorded = statuses(database)
        # the prompt receiver's delivery is stored while the stalled one is still waited for, and
        # the pool is idle
        assert recorded["to-prompt"][0] == "delivered" and recorded["to-stalled"][0] == "due", (
            recorded
        )
        assert (
            delivered_after < POLICY.timeout_s and len(deliveries.in_flight) == 1 and pool.out == 0
        )
        assert len(prompt.wait_for(1)) == 1 and len(stalled.wait_for(1)) == 1
        # nothing new is claimed while the stalled attempt has its lease; it ends at the deadline,
        # to be tried again
        assert await deliveries.round(POLICY) == 0
        await asyncio.gather(*deliveries.in_flight)
        stalled_row = statuses(database)["to-stalled"]
        assert (
            stalled_row[0] == "due"
            and stalled_row[2] == "no answer within 4 s (PARALLAX_WEBHOOK_TIMEOUT_S)"
        )
        assert sorted(outcomes) == ["delivered", "retry"] and pool.most == 1


async def test_a_replica_starts_no_more_attempts_than_it_has_room_for(database):
    with WebhookReceiver(answers=["hang"] * 5) as stalled:
        due(database, {f"w-{n}": stalled.url for n in range(5)})
        deliveries = webhooks.Deliveries(Pool(database).connection, "replica-b")
        narrow = webhooks.DeliveryPolicy(
            **{**POLICY.__dict__, "max_in_flight": 3, "timeout_s": 1.0}
        )
        assert await deliveries.round(narrow) == 3 and await deliveries.round(narrow) == 0
        await (
            deliveries.close()
        )  # a replica that stops cancels its attempts: their leases run out, nothing is lost
        assert not deliveries.in_flight
        assert sorted(status for status, _, _ in statuses(database).values()) == ["due"] * 5
