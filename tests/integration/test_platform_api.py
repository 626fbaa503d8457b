"""Double-texting, webhooks and retention on the deployed graph API: two Aegra replicas (`parallax
serve`) on one PostgreSQL database and Redis, driven with langgraph-sdk, the scripted fault server
as the model (docs/deploy.md).

The double-text requests go to both replicas at once on the same thread. The chat graph makes the
outcome visible in the thread's state: each run adds its human message, then the model's reply (one
model call, slowed down here so that a run is still in flight when the next request comes).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from parallax.runtime import webhooks
from parallax.runtime.storage.platform_schema import THREAD_LOCK_CLASS
from testkit.aegra_cluster import PARALLAX, ROOT, Cluster, two_replicas
from testkit.fault_server import default_reply
from testkit.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta"}
SECRET = "acme-webhook-secret-0123456789"
ENV = {
    "PARALLAX_WEBHOOK_SECRETS": f"acme:{SECRET}",
    "PARALLAX_WEBHOOK_ALLOW_NETWORKS": "127.0.0.0/8",
    "PARALLAX_WEBHOOK_TIMEOUT_S": "3",
    "PARALLAX_WEBHOOK_BACKOFF_S": "0.5",
    "PARALLAX_WEBHOOK_BACKOFF_MAX_S": "1",
    "PARALLAX_RETAIN_THREADS_DAYS": "30",
    "PARALLAX_RETAIN_CHECKPOINTS_DAYS": "30",
    "PARALLAX_RETAIN_TRACES_DAYS": "30",
    "PARALLAX_RETAIN_DEAD_LETTERS_DAYS": "30",
    "PARALLAX_SWEEP_INTERVAL_S": "1",
    "PARALLAX_RETAIN_CHARGES_DAYS": "30",
    "PARALLAX_MAX_TOKENS": "64",
    "CRON_ENABLED": "true",
    "CRON_POLL_INTERVAL_SECONDS": "1",
}
YEARLY = "0 0 1 1 *"  # a cron fires at creation, and then only when a test makes it due (`fire`)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(tmp_path_factory.mktemp("platform"), default_reply, KEYS, 20, ENV) as running:
        yield running


def client(replica, tenant: str = "acme"):
    return get_client(url=replica.url, api_key=KEYS[tenant])


def human(text: str) -> dict:
    return {"messages": [{"type": "human", "content": text}]}


@contextmanager
def slow_model(cluster: Cluster, latency_ms: float) -> Iterator[None]:
    """Every model call takes `latency_ms` meanwhile, so a chat run stays in flight that long."""
    cluster.set_model(latency_ms=latency_ms)
    try:
        yield
    finally:
        cluster.set_model(latency_ms=20)


def sql(cluster: Cluster, query: str, *params) -> list[tuple]:
    import psycopg  # the server venv's (the main venv collects this module without it)

    with psycopg.connect(cluster.database_url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


async def messages(sdk, thread_id: str) -> list[tuple[str, str]]:
    state = await sdk.threads.get_state(thread_id)
    return [(m["type"], m["content"]) for m in state["values"].get("messages", [])]


async def until_running(sdk, thread_id: str, run_id: str, timeout_s: float = 20.0) -> None:
    """Once the run runs and has stored its input (its first checkpoint), so an interrupt finds work
    to keep."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = await sdk.runs.get(thread_id, run_id)
        assert run["status"] in ("pending", "running"), run
        if run["status"] == "running" and (await sdk.threads.get_state(thread_id))["values"].get(
            "messages"
        ):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} did not start within {timeout_s}s")


def docs_signature_check():
    """`signed_by_parallax` from docs/deploy.md (Webhooks), run as written: what a receiver
    pastes."""
    import re

    text = (ROOT / "docs" / "deploy.md").read_text()
    block = next(
        b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "def signed_by_parallax" in b
    )
    namespace: dict = {}
    exec(compile(block, "docs/deploy.md", "exec"), namespace)  # noqa: S102 - our own docs
    return namespace["signed_by_parallax"]


def replica_of(cluster: Cluster, holder: str):
    """The live replica whose process is `holder` (host-pid, as the webhook outbox records it)."""
    pid = int(holder.rsplit("-", 1)[-1])
    return next(r for r in cluster.replicas if r.pid == pid and r.alive())


# --- double-texting ------------------------------------------------------------------------------


async def test_reject_two_requests_at_once_on_two_replicas_one_runs_the_other_gets_409(cluster):
    a, b = cluster.live()
    with slow_model(cluster, 2000):
        thread_id = (await client(a).threads.create())["thread_id"]
        outcomes = await asyncio.gather(
            client(a).runs.create(
                thread_id, "chat", input=human("from a"), multitask_strategy="reject"
            ),
            client(b).runs.create(
                thread_id, "chat", input=human("from b"), multitask_strategy="reject"
            ),
            return_exceptions=True,
        )
        refused = [o for o in outcomes if isinstance(o, ConflictError)]
        created = [o for o in outcomes if isinstance(o, dict)]
        assert len(refused) == 1 and len(created) == 1, outcomes
        assert (
            refused[0].response.status_code == 409
            and "in flight" in refused[0].response.json()["message"]
        )
        await client(b).runs.join(thread_id, created[0]["run_id"])
    assert [r["status"] for r in await client(a).runs.list(thread_id)] == ["success"]
    assert len(await messages(client(a), thread_id)) == 2  # the refused run left nothing behind
    later = await client(b).runs.wait(
        thread_id, "chat", input=human("later"), multitask_strategy="reject"
    )
    assert [m["type"] for m in later["messages"]] == [
        "human",
        "ai",
        "human",
        "ai",
    ]  # a free thread takes a run


async def test_enqueue_two_requests_at_once_on_two_replicas_run_one_after_the_other(cluster):
    a, b = cluster.live()
    with slow_model(cluster, 1500):
        thread_id = (await client(a).threads.create())["thread_id"]
        first, second = await asyncio.gather(
            client(a).runs.create(
                thread_id, "chat", input=human("one"), multitask_strategy="enqueue"
            ),
            client(b).runs.create(thread_id, "chat", input=human("two")),
        )  # no strategy: enqueue, the default
        for run in (first, second):
            await client(a).runs.join(thread_id, run["run_id"])
    runs = {r["run_id"]: r["status"] for r in await client(b).runs.list(thread_id)}
    assert runs == {first["run_id"]: "success", second["run_id"]: "success"}
    said = await messages(client(a), thread_id)
    assert [kind for kind, _ in said] == [
        "human",
        "ai",
        "human",
        "ai",
    ]  # one turn after the other, none lost
    assert {said[0][1], said[2][1]} == {"one", "two"}
    # the checkpoints of one run all come before those of the other: they never ran side by side
    spans = sql(
        cluster,
        "SELECT metadata->>'run_id', min(checkpoint->>'ts'), max(checkpoint->>'ts') FROM"
        " checkpoints WHERE thread_id = %s AND checkpoint_ns = '' GROUP BY 1 ORDER BY 2",
        thread_id,
    )
    assert len(spans) == 2 and spans[0][2] < spans[1][1], spans
    strategies = sql(
        cluster,
        "SELECT execution_params->'behavior'->>'multitask_strategy' FROM runs WHERE thread_id = %s",
        thread_id,
    )
    assert strategies == [("enqueue",), ("enqueue",)]


async def test_interrupt_stops_the_run_in_flight_keeps_its_state_and_takes_concurrent_calls_in_turn(
    cluster,
):
    a, b = cluster.live()
    with slow_model(cluster, 3000):
        thread_id = (await client(a).threads.create())["thread_id"]
        first = await client(a).runs.create(
            thread_id, "chat", input=human("first"), multitask_strategy="interrupt"
        )
        await until_running(client(a), thread_id, first["run_id"])
        second, third = await asyncio.gather(
            client(b).runs.create(
                thread_id, "chat", input=human("second"), multitask_strategy="interrupt"
            ),
            client(a).runs.create(
                thread_id, "chat", input=human("third"), multitask_strategy="interrupt"
            ),
        )
        statuses = {r["run_id"]: r["status"] for r in await client(b).runs.list(thread_id)}
        assert (
            statuses[first["run_id"]] == "interrupted"
        )  # stopped before the later runs were created
        for run in (second, third):
            await client(a).runs.join(thread_id, run["run_id"])
    statuses = {r["run_id"]: r["status"] for r in await client(b).runs.list(thread_id)}
    assert sorted(statuses.values()) == ["interrupted", "interrupted", "success"], statuses
    winner = {second["run_id"]: "second", third["run_id"]: "third"}[
        next(k for k, v in statuses.items() if v == "success")
    ]
    said = await messages(client(b), thread_id)
    assert said[0] == ("human", "first")  # the interrupted run's work is kept
    assert (
        ("human", winner) in said and said[-1][0] == "ai" and [k for k, _ in said].count("ai") == 1
    )
    run_first = await client(b).runs.get(thread_id, first["run_id"])  # and so is the run itself
    assert run_first["status"] == "interrupted"


async def test_rollback_deletes_the_run_in_flight_and_its_checkpoints(cluster):
    a, b = cluster.live()
    with slow_model(cluster, 3000):
        thread_id = (await client(a).threads.create())["thread_id"]
        done = await client(a).runs.wait(
            thread_id, "chat", input=human("kept")
        )  # an earlier turn stays
        assert [m["type"] for m in done["messages"]] == ["human", "ai"]
        first = await client(a).runs.create(
            thread_id, "chat", input=human("first"), multitask_strategy="rollback"
        )
        await until_running(client(a), thread_id, first["run_id"])
        second, third = await asyncio.gather(
            client(b).runs.create(
                thread_id, "chat", input=human("second"), multitask_strategy="rollback"
            ),
            client(a).runs.create(
                thread_id, "chat", input=human("third"), multitask_strategy="rollback"
            ),
        )
        with pytest.raises(NotFoundError):
            await client(b).runs.get(thread_id, first["run_id"])
        for run in (second, third):
            try:
                await client(a).runs.join(thread_id, run["run_id"])
            except (NotFoundError, httpx.HTTPStatusError) as exc:  # the one the other rolled back
                assert exc.response.status_code == 404
    left = await client(b).runs.list(thread_id)
    assert len(left) == 2 and {r["status"] for r in left} == {"success"}, (
        left
    )  # the earlier turn and the winner
    kept = {r["run_id"] for r in left}
    assert (second["run_id"] in kept) != (third["run_id"] in kept)
    said = await messages(client(b), thread_id)
    assert [kind for kind, _ in said] == ["human", "ai", "human", "ai"]
    assert said[0] == ("human", "kept") and said[2] == (
        "human",
        "second" if second["run_id"] in kept else "third",
    )
    gone = [first["run_id"], *(r["run_id"] for r in (second, third) if r["run_id"] not in kept)]
    assert sql(
        cluster, "SELECT count(*) FROM checkpoints WHERE metadata->>'run_id' = ANY(%s)", gone
    ) == [(0,)]
    assert sql(cluster, "SELECT count(*) FROM runs WHERE run_id = ANY(%s)", gone) == [(0,)]


# --- webhooks ------------------------------------------------------------------------------------


def outbox(cluster: Cluster, webhook_id: str) -> dict:
    import psycopg

    with psycopg.connect(cluster.database_url) as conn:
        cursor = conn.execute("SELECT * FROM parallax_webhooks WHERE id = %s", (webhook_id,))
        names = [c.name for c in cursor.description]
        return dict(zip(names, cursor.fetchone(), strict=True))


def until_delivered(cluster: Cluster, webhook_id: str, timeout_s: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while (row := outbox(cluster, webhook_id))["status"] != "delivered":
        assert time.monotonic() < deadline, row
        time.sleep(0.1)
    return row


async def test_a_run_that_ends_posts_its_signed_webhook_from_every_kind_of_run_creation(cluster):
    a, b = cluster.live()
    with WebhookReceiver() as receiver:
        thread_id = (await client(a).threads.create())["thread_id"]
        run = await client(a).runs.create(
            thread_id, "chat", input=human("hook me"), webhook=receiver.url
        )
        (got,) = receiver.wait_for(1)
        body = json.loads(got.body)
        signed_by_parallax = docs_signature_check()
        assert signed_by_parallax(SECRET, got.body, got.headers["x-parallax-signature"])
        assert not signed_by_parallax(
            "another-secret-0123456789", got.body, got.headers["x-parallax-signature"]
        )
        assert (body["run_id"], body["thread_id"], body["status"]) == (
            run["run_id"],
            thread_id,
            "success",
        )
        assert body["webhook_id"] == got.headers["x-parallax-delivery"]
        assert [m["type"] for m in body["values"]["messages"]] == ["human", "ai"]
        assert until_delivered(cluster, body["webhook_id"])["attempts"] == 1
        # the wait endpoint and a stateless run (whose thread is gone once it ends) post theirs too
        await client(b).runs.wait(thread_id, "chat", input=human("again"), webhook=receiver.url)
        await client(b).runs.wait(
            None, "solve", input={"task": "What is 2 + 2?", "mode": "direct"}, webhook=receiver.url
        )
        # two webhooks due within one delivery round go out at once, in no promised order
        # (docs/deploy.md)
        later = [json.loads(r.body) for r in receiver.wait_for(3)[1:]]
        assert [x["status"] for x in later] == ["success", "success"]
        on_thread = [x for x in later if x["thread_id"] == thread_id]
        stateless = [x for x in later if x["thread_id"] != thread_id]
        assert len(on_thread) == len(stateless) == 1 and stateless[0]["values"]["answer"] == "42"


async def test_webhooks_to_refused_addresses_or_without_a_secret_are_422_and_create_no_run(cluster):
    a, _ = cluster.live()
    thread_id = (await client(a).threads.create())["thread_id"]
    for url, says in [
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.1.2.3/hook", "private"),
        ("http://[::1]:8080/hook", "loopback"),
        ("http://[::ffff:192.168.0.1]/hook", "private"),
        ("ftp://127.0.0.1/hook", "http or https"),
        ("http://0.0.0.0:9/hook", "unspecified"),
    ]:
        with pytest.raises(UnprocessableEntityError) as refused:
            await client(a).runs.create(thread_id, "chat", input=human("no"), webhook=url)
        assert says in refused.value.response.json()["message"], (
            url,
            refused.value.response.json(),
        )
    with pytest.raises(UnprocessableEntityError, match="no webhook secret"):
        beta_thread = (await client(a, "beta").threads.create())["thread_id"]
        await client(a, "beta").runs.create(
            beta_thread, "chat", input=human("no"), webhook="http://127.0.0.1:9/hook"
        )
    assert await client(a).runs.list(thread_id) == []
    assert sql(
        cluster,
        "SELECT count(*) FROM parallax_webhooks WHERE url LIKE '%%10.1.2.3%%' OR tenant = 'beta'",
    ) == [(0,)]


async def test_a_webhook_the_receiver_refuses_is_retried_with_backoff_until_it_is_taken(cluster):
    a, _ = cluster.live()
    with WebhookReceiver(answers=[503, 500]) as receiver:
        thread_id = (await client(a).threads.create())["thread_id"]
        await client(a).runs.create(
            thread_id, "chat", input=human("retry me"), webhook=receiver.url
        )
        tries = receiver.wait_for(3)
        assert [t.answered for t in tries] == [503, 500, 200]
        assert [t.headers["x-parallax-attempt"] for t in tries] == ["1", "2", "3"]
        assert (
            len({t.headers["x-parallax-delivery"] for t in tries}) == 1
        )  # one delivery, tried three times
        gaps = [later.time - earlier.time for earlier, later in zip(tries, tries[1:], strict=False)]
        assert gaps[0] >= 0.45 and gaps[1] >= 0.95, (
            gaps
        )  # 0.5 s, then 1 s (PARALLAX_WEBHOOK_BACKOFF_S=0.5, max 1)
        row = until_delivered(cluster, tries[0].headers["x-parallax-delivery"])
        assert (row["attempts"], row["last_status"]) == (3, 200)


# --- crons --------------------------------------------------------------------------------------


def fire(cluster: Cluster, cron_id: str) -> None:
    """Make the cron due now: the scheduler (polling every second, on either replica) fires it."""
    sql(cluster, "UPDATE crons SET next_run_date = now() WHERE cron_id = %s", cron_id)


async def cron_of(sdk, thread_id: str) -> str:
    (cron,) = await sdk.crons.search(thread_id=thread_id)
    return cron["cron_id"]


async def runs_of(sdk, thread_id: str, n: int, timeout_s: float = 60.0) -> list[dict]:
    """The thread's runs, oldest first, once there are `n`."""
    deadline = time.monotonic() + timeout_s
    while len(found := await sdk.runs.list(thread_id)) < n:
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.2)
    return sorted(found, key=lambda r: r["created_at"])


async def new_run(sdk, thread_id: str, known: set[str], timeout_s: float = 60.0) -> dict:
    """The thread's first run not in `known`. Counting runs would not do where a run can go as the
    new one comes: a rollback cron's run makes the run in flight be deleted within a second of its
    own insert."""
    deadline = time.monotonic() + timeout_s
    while not (new := [r for r in await sdk.runs.list(thread_id) if r["run_id"] not in known]):
        assert time.monotonic() < deadline, f"no new run on thread {thread_id} within {timeout_s}s"
        await asyncio.sleep(0.2)
    return min(new, key=lambda r: r["created_at"])


async def test_a_cron_with_a_webhook_posts_a_signed_webhook_for_each_run_it_creates(cluster):
    a, b = cluster.live()
    with WebhookReceiver() as receiver:
        thread_id = (await client(a).threads.create())["thread_id"]
        first = await client(a).crons.create_for_thread(
            thread_id, "chat", schedule=YEARLY, input=human("tick"), webhook=receiver.url
        )
        (got,) = receiver.wait_for(1)  # the run the cron's creation starts
        assert webhooks.verify(SECRET, got.body, got.headers["x-parallax-signature"])
        body = json.loads(got.body)
        assert (body["run_id"], body["thread_id"], body["status"]) == (
            first["run_id"],
            thread_id,
            "success",
        )
        cron_id = await cron_of(client(b), thread_id)
        await client(b).crons.update(
            cron_id, config={"tags": ["nightly"]}
        )  # a new config keeps the webhook
        with pytest.raises(UnprocessableEntityError, match="link-local"):
            await client(a).crons.update(cron_id, webhook="http://169.254.169.254/latest/meta-data")
        fire(cluster, cron_id)  # and a run the scheduler creates
        scheduled = receiver.wait_for(2)[1]
        assert webhooks.verify(SECRET, scheduled.body, scheduled.headers["x-parallax-signature"])
        later = json.loads(scheduled.body)
        runs = await runs_of(client(a), thread_id, 2)
        assert [r["run_id"] for r in runs] == [first["run_id"], later["run_id"]] and later[
            "status"
        ] == "success"
        assert [m["content"] for m in later["values"]["messages"] if m["type"] == "human"] == [
            "tick",
            "tick",
        ]
        assert later["webhook_id"] != body["webhook_id"]
        assert until_delivered(cluster, later["webhook_id"])["attempts"] == 1
        # a stateless cron's run posts its webhook too
        await client(b).crons.create(
            "solve",
            schedule=YEARLY,
            input={"task": "What is 2 + 2?", "mode": "direct"},
            webhook=receiver.url,
        )
        stateless = json.loads(receiver.wait_for(3)[2].body)
        assert stateless["status"] == "success" and stateless["values"]["answer"] == "42"
        await client(a).crons.delete(cron_id)
        with pytest.raises(UnprocessableEntityError, match="private"):
            await client(a).crons.create_for_thread(
                thread_id,
                "chat",
                schedule=YEARLY,
                input=human("no"),
                webhook="http://10.1.2.3/hook",
            )
        assert await client(a).crons.search(thread_id=thread_id) == []
        await asyncio.sleep(1.5)
        assert len(receiver.received) == 3  # one webhook per run, no more
    with pytest.raises(UnprocessableEntityError, match="no webhook secret"):
        beta_thread = (await client(a, "beta").threads.create())["thread_id"]
        await client(a, "beta").crons.create_for_thread(
            beta_thread,
            "chat",
            schedule=YEARLY,
            input=human("no"),
            webhook="http://127.0.0.1:9/hook",
        )


async def test_a_cron_stored_before_parallax_linked_crons_gets_its_webhooks_after_the_migration(
    cluster,
):
    """A cron an older Parallax (or Aegra alone) stored has no link in its config, so its runs'
    webhooks were never armed; `parallax serve`'s migration links it, and its next run posts its
    webhook."""
    from parallax.runtime.storage import platform_schema

    a, _ = cluster.live()
    with WebhookReceiver() as receiver:
        thread_id = (await client(a).threads.create())["thread_id"]
        await client(a).crons.create_for_thread(
            thread_id, "chat", schedule=YEARLY, input=human("old"), webhook=receiver.url
        )
        receiver.wait_for(1)
        cron_id = await cron_of(client(a), thread_id)
        sql(
            cluster,
            "UPDATE crons SET payload = payload #- '{config,metadata,parallax_cron}' WHERE cron_id"
            " = %s",
            cron_id,
        )  # as an older Parallax stored it
        import psycopg

        with psycopg.connect(cluster.database_url, autocommit=True) as conn:
            platform_schema.migrate(conn)
        (link,) = sql(
            cluster,
            "SELECT payload -> 'config' -> 'metadata' ->> 'parallax_cron' FROM crons "
            "WHERE cron_id = %s",
            cron_id,
        )[0]
        assert link
        fire(cluster, cron_id)
        scheduled = json.loads(receiver.wait_for(2)[1].body)
        assert scheduled["thread_id"] == thread_id and scheduled["status"] == "success"
        platform_schema.migrate(
            psycopg.connect(cluster.database_url, autocommit=True)
        )  # again: the link stays
        assert (
            sql(
                cluster,
                "SELECT payload -> 'config' -> 'metadata' ->> 'parallax_cron' FROM crons "
                "WHERE cron_id = %s",
                cron_id,
            )[0][0]
            == link
        )
        await client(a).crons.delete(cron_id)


async def test_a_cron_firing_on_a_busy_thread_follows_its_strategy_reject_ends_it_enqueue_waits(
    cluster,
):
    a, b = cluster.live()
    with WebhookReceiver() as receiver, slow_model(cluster, 3000):
        thread_id = (await client(a).threads.create())["thread_id"]
        rejecting = await client(b).crons.create_for_thread(
            thread_id,
            "chat",
            schedule=YEARLY,
            input=human("reject"),
            multitask_strategy="reject",
            webhook=receiver.url,
        )
        await client(a).runs.join(
            thread_id, rejecting["run_id"]
        )  # a free thread: its first run runs
        cron_id = await cron_of(client(a), thread_id)
        busy = await client(a).runs.create(thread_id, "chat", input=human("busy"))
        await until_running(client(a), thread_id, busy["run_id"])
        # an enqueue cron's run waits for the run in flight
        queued = await client(b).crons.create_for_thread(
            thread_id, "chat", schedule=YEARLY, input=human("queued"), multitask_strategy="enqueue"
        )
        assert (await client(a).runs.get(thread_id, queued["run_id"]))["status"] == "pending"
        fire(cluster, cron_id)  # the reject cron fires while the thread is busy
        refused = (await runs_of(client(b), thread_id, 4))[3]
        assert refused["status"] == "error", refused  # stored ended: no worker starts it
        assert (await client(a).runs.get(thread_id, busy["run_id"]))[
            "status"
        ] == "running"  # the run in flight goes on
        # the two may be due within one delivery round, which posts them at once in no promised
        # order
        hooks = {h["run_id"]: h for h in (json.loads(r.body) for r in receiver.wait_for(2))}
        assert {run_id: h["status"] for run_id, h in hooks.items()} == {
            rejecting["run_id"]: "success",
            refused["run_id"]: "error",
        }
        error = hooks[refused["run_id"]]["error"]
        assert f"in flight ({busy['run_id']})" in error and "reject" in error
        await client(a).runs.join(thread_id, queued["run_id"])
        for cron in await client(a).crons.search(thread_id=thread_id):
            await client(a).crons.delete(cron["cron_id"])
    statuses = {r["run_id"]: r["status"] for r in await client(b).runs.list(thread_id)}
    assert (statuses[busy["run_id"]], statuses[queued["run_id"]]) == ("success", "success")
    said = [content for kind, content in await messages(client(a), thread_id) if kind == "human"]
    assert said == [
        "reject",
        "busy",
        "queued",
    ]  # the refused run left nothing behind; the queued one came after


def in_line_for_lock(cluster: Cluster, thread_id: str) -> int:
    """How many sessions wait inside a statement for the thread's double-text lock (as the trigger
    on a cron's run waits in its INSERT)."""
    ((count,),) = sql(
        cluster,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid = %s::oid AND objid = hashtext(%s)::oid AND objsubid = 2",
        THREAD_LOCK_CLASS,
        thread_id,
    )
    return count


def waiting(cluster: Cluster) -> int:
    """How many sessions of the deployment's database wait: inside a statement for any lock, or
    between tries of the per-thread lock (the HTTP route's ThreadLock polls it)."""
    ((count,),) = sql(
        cluster,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND (wait_event_type = 'Lock' OR query = 'SELECT pg_try_advisory_lock($1, hashtext($2))')",
    )
    return count


async def until(condition, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_a_reject_cron_firing_and_a_reject_request_at_once_on_a_free_thread_take_turns(
    cluster,
):
    """The trigger on a cron's run and the HTTP route take one per-thread lock. Held here (as by a
    third holder), it makes both wait, the cron's run in its INSERT and the request before its
    check; released, the cron's run (first in line) is stored, and the request then sees it in
    flight: 409, never two runs where 'reject' allows one.
    """
    a, b = cluster.live()
    thread_id = (await client(a).threads.create())["thread_id"]
    cron = await client(b).crons.create_for_thread(
        thread_id,
        "chat",
        schedule=YEARLY,
        input=human("cron"),
        multitask_strategy="reject",
        enabled=False,
    )
    await client(a).crons.update(cron["cron_id"], enabled=True)
    import psycopg

    with psycopg.connect(cluster.database_url, autocommit=True) as held:
        held.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (THREAD_LOCK_CLASS, thread_id))
        fire(cluster, cron["cron_id"])
        await until(
            lambda: in_line_for_lock(cluster, thread_id) == 1,
            "the cron's run did not wait for the lock",
        )
        request = asyncio.create_task(
            client(a).runs.create(
                thread_id, "chat", input=human("request"), multitask_strategy="reject"
            )
        )
        await until(
            lambda: request.done() or waiting(cluster) == 2,
            "the request neither waited nor was answered",
        )
        held.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (THREAD_LOCK_CLASS, thread_id))
    (refused,) = await asyncio.gather(request, return_exceptions=True)
    assert isinstance(refused, ConflictError), refused  # not a second run beside the cron's
    (fired,) = await runs_of(client(b), thread_id, 1)
    assert f"in flight ({fired['run_id']})" in refused.response.json()["message"]
    await client(a).runs.join(thread_id, fired["run_id"])
    await client(a).crons.delete(cron["cron_id"])
    assert [r["status"] for r in await client(b).runs.list(thread_id)] == ["success"]
    assert [
        content for kind, content in await messages(client(a), thread_id) if kind == "human"
    ] == ["cron"]


async def test_an_interrupt_or_rollback_cron_stops_the_run_in_flight_before_its_own_runs(cluster):
    a, b = cluster.live()
    with slow_model(cluster, 3000):
        thread_id = (await client(a).threads.create())["thread_id"]
        busy = await client(a).runs.create(thread_id, "chat", input=human("busy"))
        await until_running(client(a), thread_id, busy["run_id"])
        run = await client(b).crons.create_for_thread(
            thread_id, "chat", schedule=YEARLY, input=human("cron"), multitask_strategy="interrupt"
        )
        await client(a).runs.join(thread_id, run["run_id"])
        statuses = {r["run_id"]: r["status"] for r in await client(b).runs.list(thread_id)}
        assert statuses == {busy["run_id"]: "interrupted", run["run_id"]: "success"}
        said = await messages(client(a), thread_id)
        assert [m for m in said if m[0] == "human"] == [
            ("human", "busy"),
            ("human", "cron"),
        ]  # the interrupted input stays
        assert [kind for kind, _ in said].count("ai") == 1
        await client(a).crons.delete(await cron_of(client(a), thread_id))

        # rollback, on a firing of the scheduler
        thread_id = (await client(a).threads.create())["thread_id"]
        await client(a).runs.wait(thread_id, "chat", input=human("kept"))
        (kept,) = await client(a).runs.list(thread_id)
        cron = await client(b).crons.create_for_thread(
            thread_id,
            "chat",
            schedule=YEARLY,
            input=human("cron"),
            multitask_strategy="rollback",
            enabled=False,
        )
        doomed = await client(a).runs.create(thread_id, "chat", input=human("doomed"))
        await until_running(client(a), thread_id, doomed["run_id"])
        await client(a).crons.update(cron["cron_id"], enabled=True)
        fire(cluster, cron["cron_id"])
        fired = await new_run(client(b), thread_id, {kept["run_id"], doomed["run_id"]})
        await client(a).runs.join(thread_id, fired["run_id"])
        await client(a).crons.delete(cron["cron_id"])
    with pytest.raises(NotFoundError):
        await client(b).runs.get(thread_id, doomed["run_id"])
    assert [r["status"] for r in await client(b).runs.list(thread_id)] == ["success", "success"]
    said = await messages(client(a), thread_id)
    assert (
        said[0] == ("human", "kept")
        and said[2] == ("human", "cron")
        and [k for k, _ in said] == ["human", "ai"] * 2
    )
    assert sql(
        cluster, "SELECT count(*) FROM checkpoints WHERE metadata->>'run_id' = %s", doomed["run_id"]
    ) == [(0,)]


# --- retention -----------------------------------------------------------------------------------

OLD = "now() - interval '40 days'"


async def test_the_replicas_sweep_removes_what_is_old_and_keeps_young_rows_and_running_threads(
    cluster,
):
    a, b = cluster.live()
    sdk = client(a)
    old, young, history, busy = [(await sdk.threads.create())["thread_id"] for _ in range(4)]
    for thread_id in (old, young, history):
        await sdk.runs.wait(thread_id, "chat", input=human("turn one"))
    await sdk.runs.wait(history, "chat", input=human("turn two"))
    sql(
        cluster,
        "INSERT INTO store (prefix, key, value, created_at, updated_at) VALUES ('traces.acme',"
        f" 'old-trace', '{{}}', {OLD}, {OLD}), ('traces.acme', 'young-trace', '{{}}', now(),"
        f" now()),('dlq.acme', 'old-letter', '{{}}', {OLD}, {OLD}), ('dlq.acme', 'young-letter',"
        f" '{{}}', now(), now()),('plan_results.acme.t1', 'old-result', '{{}}', {OLD},"
        f" {OLD}),('playbooks.acme.fin', 'old-playbook', '{{}}', {OLD}, {OLD})",
    )
    sql(
        cluster,
        "INSERT INTO parallax_run_charges (run_id, tenant, day, tokens) VALUES ('old-charge',"
        f" 'acme', ({OLD})::date, 10), ('young-charge', 'acme', parallax_utc_day() - 1, 10)",
    )
    sql(
        cluster,
        "INSERT INTO parallax_tenant_spend (tenant, day, tokens) VALUES "
        f"('ledger-acme', ({OLD})::date, 10), ('ledger-acme', parallax_utc_day() - 1, 10)",
    )
    first_turn, latest = sql(
        cluster,
        "SELECT min(checkpoint_id), max(checkpoint_id) FROM checkpoints "
        "WHERE thread_id = %s AND checkpoint_ns = ''",
        history,
    )[0]
    with slow_model(cluster, 6000):
        running = await client(b).runs.create(busy, "chat", input=human("still going"))
        await until_running(client(b), busy, running["run_id"])
        sql(cluster, f"UPDATE thread SET updated_at = {OLD} WHERE thread_id = ANY(%s)", [old, busy])
        sql(
            cluster,
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{ts}',"
            f" to_jsonb(({OLD})::text)) WHERE thread_id = ANY(%s)",
            [history, busy],
        )
        deadline = time.monotonic() + 10
        while sql(cluster, "SELECT count(*) FROM thread WHERE thread_id = %s", old) != [(0,)]:
            assert time.monotonic() < deadline, "the periodic sweep did not remove the old thread"
            await asyncio.sleep(0.2)
        time.sleep(1.5)  # a sweep more, with the run still in flight
        assert (await client(b).runs.get(busy, running["run_id"]))["status"] == "running"
        await client(b).runs.join(busy, running["run_id"])
    with pytest.raises(NotFoundError):
        await sdk.threads.get(old)
    assert sql(cluster, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", old) == [(0,)]
    assert sql(cluster, "SELECT count(*) FROM runs WHERE thread_id = %s", old) == [(0,)]
    assert (await sdk.threads.get(young))["thread_id"] == young and len(
        await messages(sdk, young)
    ) == 2
    # the running thread is whole, and its run ended well
    assert (await sdk.runs.get(busy, running["run_id"]))["status"] == "success"
    assert [k for k, _ in await messages(sdk, busy)] == ["human", "ai"]
    # checkpoint history: only the latest checkpoint is left of the old ones, and the state is the
    # same
    left = sql(
        cluster,
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''",
        history,
    )
    assert left == [(latest,)] and first_turn != latest
    assert [k for k, _ in await messages(sdk, history)] == ["human", "ai", "human", "ai"]
    records = {
        key
        for (key,) in sql(
            cluster, "SELECT key FROM store WHERE key LIKE 'old-%%' OR key LIKE 'young-%%'"
        )
    }
    assert records == {"young-trace", "young-letter", "old-playbook"}  # playbooks are not swept
    assert sql(
        cluster, "SELECT run_id FROM parallax_run_charges WHERE run_id LIKE '%%-charge'"
    ) == [("young-charge",)]
    assert sql(cluster, "SELECT day FROM parallax_tenant_spend WHERE tenant = 'ledger-acme'") == [
        (datetime.now(UTC).date() - timedelta(days=1),)
    ]
    assert (
        sum(await asyncio.gather(*(swept_threads(r) for r in (a, b)))) >= 1
    )  # /metrics counts what was swept


async def swept_threads(replica) -> float:
    async with httpx.AsyncClient(trust_env=False) as h:
        text = (await h.get(f"{replica.url}/metrics")).text
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith('parallax_swept_total{kind="threads"}')
    )


def test_parallax_sweep_sweeps_once_with_its_own_limits(cluster):
    a, _ = cluster.live()
    created = asyncio.run(client(a).threads.create())["thread_id"]
    sql(
        cluster,
        "UPDATE thread SET updated_at = now() - interval '20 days' WHERE thread_id = %s",
        created,
    )
    sql(
        cluster,
        "INSERT INTO store (prefix, key, value, created_at, updated_at) VALUES "
        "('traces.acme', 'cli-trace', '{}', now() - interval '20 days', now() - interval '20"
        " days')",
    )
    env = {
        **os.environ,
        "DATABASE_URL": cluster.database_url,
        "PARALLAX_HOME": str(cluster.work / "cli-home"),
    }
    for name in [k for k in env if k.startswith("PARALLAX_RETAIN_")]:
        env.pop(name)
    done = subprocess.run(
        [str(PARALLAX), "sweep", "--threads-days", "10", "--traces-days", "10", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (
        out["threads"] >= 1 and out["traces"] >= 1 and out["limits_days"]["threads_days"] == 10
    ), out
    assert sql(cluster, "SELECT count(*) FROM thread WHERE thread_id = %s", created) == [(0,)]
    assert sql(cluster, "SELECT count(*) FROM store WHERE key = 'cli-trace'") == [(0,)]


# --- a replica killed while it delivers (last: it leaves one replica) ----------------------------


async def test_a_replica_killed_while_delivering_loses_no_webhook_the_other_delivers_it(cluster):
    a, b = cluster.live()
    with WebhookReceiver(answers=["hang"]) as receiver:
        thread_id = (await client(a).threads.create())["thread_id"]
        run = await client(a).runs.create(
            thread_id, "chat", input=human("deliver me"), webhook=receiver.url
        )
        (hung,) = receiver.wait_for(1)
        webhook_id = hung.headers["x-parallax-delivery"]
        row = outbox(cluster, webhook_id)
        assert row["status"] == "due" and row["run_id"] == run["run_id"]
        sender = replica_of(cluster, row["claimed_by"])
        sender.kill()  # SIGKILL while its POST is open: no answer, no record of it
        receiver.release()
        survivor = b if sender is a else a
        _, again = receiver.wait_for(2, timeout_s=30)
        assert again.headers["x-parallax-delivery"] == webhook_id and again.answered == 200
        assert webhooks.verify(SECRET, again.body, again.headers["x-parallax-signature"])
        assert json.loads(again.body)["run_id"] == run["run_id"]
        row = until_delivered(cluster, webhook_id)
        assert replica_of(cluster, row["claimed_by"]) is survivor and row["attempts"] == 2
