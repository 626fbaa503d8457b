"""`runs.wait`, `runs.join` and the stateless wait return when the run ends: woken by a
notification, not a poll.

Two `parallax serve` replicas on PostgreSQL and Redis: a front replica with no workers
(WORKER_COUNT=0) and a worker replica, so every run waited for through the front is executed by
the other replica. Each wait must come back with the run's output, and each replica's
`parallax_run_waits_total` must count it as `notified` (server/run_done.py), never `polled`: a
poll is what Aegra did every 2 s, and the safety net that remains would show there. How long a
wait takes against a stream of the same run is `bench.serve`'s `waits` (no timed assertion here).
Needs the server venv (`.ci/run` runs it with `-m deploy`; a skip fails in CI).
"""

from __future__ import annotations

import pytest

from testkit import openai_checks
from testkit.aegra_cluster import Cluster, require_services
from testkit.fault_server import FaultConfig, FaultServer
from tests.integration.test_deploy import scrape, total

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEY = "key-acme"
TASK = {"task": "What is 6 * 7?", "mode": "vote", "votes": 3}


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    require_services()
    server = FaultServer(
        FaultConfig(latency_ms=300, reply=openai_checks.reply)
    )  # runs outlast a wait's start
    env = {
        "OPENAI_BASE_URL": server.start(),
        "PARALLAX_RESPONSE_FORMAT": "json_schema",
        "PARALLAX_MODEL": "fault-model",
        "PARALLAX_API_KEYS": f"{KEY}:acme",
        "PARALLAX_STRAGGLER_FACTOR": "0",
    }
    cluster = Cluster(tmp_path_factory.mktemp("deploy-waits"), env).create()
    try:
        worker = cluster.start_replica()
        cluster.env["WORKER_COUNT"] = (
            "0"  # the front replica executes nothing: its waits are for the worker's runs
        )
        front = cluster.start_replica()
        yield front, worker
    finally:
        cluster.close()
        server.stop()


WAITS = 'parallax_run_waits_total{ended="%s"}'


async def test_wait_join_and_stateless_wait_are_notified_on_the_replica_that_did_not_run_them(
    replicas,
):
    from langgraph_sdk import get_client

    front, worker = replicas
    before = [await scrape(r) for r in replicas]
    client = get_client(url=front.url, api_key=KEY)
    thread = await client.threads.create()
    waited = await client.runs.wait(thread["thread_id"], "solve", input=TASK)
    run = await client.runs.create(
        thread["thread_id"], "solve", input={**TASK, "task": "What is 7 * 6?"}
    )
    await client.runs.join(thread["thread_id"], run["run_id"])
    joined = await client.runs.get(thread["thread_id"], run["run_id"])
    stateless = await client.runs.wait(None, "solve", input=TASK)
    on_worker = await get_client(url=worker.url, api_key=KEY).runs.wait(None, "solve", input=TASK)
    after = [await scrape(r) for r in replicas]

    assert waited["answer"] == stateless["answer"] == on_worker["answer"] == "42"
    assert joined["status"] == "success"
    notified = [
        after[n].get(WAITS % "notified", 0) - before[n].get(WAITS % "notified", 0) for n in (0, 1)
    ]
    assert notified == [
        3,
        1,
    ], after  # three waits on the front (none of its runs ran there), one on the worker
    for ended in ("polled", "timeout"):
        assert total(after, WAITS % ended) == total(before, WAITS % ended), (ended, after)
