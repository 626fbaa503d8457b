"""A tenant's daily budget on the deployed API: two Aegra replicas (`parallax serve`) on one
PostgreSQL database and Redis, driven with langgraph-sdk and the openai SDK, the scripted fault
server as the model (priced through PARALLAX_PRICES, so its calls cost money as well as tokens).

What an operator relies on: a tenant under its budget runs (capped at what it has left), one past it
gets 429 with Retry-After and the reason (Aegra's error JSON on the graph API, OpenAI's on /v1) and
nothing is created for it, other tenants are unaffected, a cron's run is refused as it is created,
and many requests of one tenant at once on both replicas do not spend past the budget beyond what
the runs in flight could, each run charged exactly once. Every request is held at its worst case
against its run's cap before it is sent (runtime/request_budget.py), so a run never spends past its
cap; a run its cap stopped, with a cap at least what the day has left, marks the day reached. Needs
the server venv (`.ci/run` runs it with `-m deploy`; a skip fails in CI).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from langgraph_sdk import get_client

from testkit.aegra_cluster import sql, two_replicas
from testkit.fault_server import default_reply
from tests.integration.test_deploy import scrape, total

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {
    "acme": "key-acme",
    "beta": "key-beta",
    "crowd": "key-crowd",
    "cronny": "key-cronny",
    "free": "key-free",
}
PRICE = 1000.0
"""USD per million tokens, prompt and reply alike: a call of ~200 tokens costs ~$0.2."""
CROWD_TOKENS = 2500
ENV = {
    "PARALLAX_PRICES": json.dumps({"fault-model": {"input": PRICE, "output": PRICE}}),
    "PARALLAX_DAILY_BUDGETS": (
        f"acme:0.05usd,beta:1000usd,crowd:{CROWD_TOKENS}tokens,cronny:0.05usd"
    ),
    "PARALLAX_MAX_TOKENS": "64",
    "CRON_ENABLED": "true",
    "CRON_POLL_INTERVAL_SECONDS": "1",
}
YEARLY = "0 0 1 1 *"
DIRECT = {"task": "What is 6 * 7?", "mode": "direct"}
VOTES = 4
VOTE = {"task": "What is 6 * 7?", "mode": "vote", "votes": VOTES}
ONE_AT_A_TIME = {"max_concurrency": 1}
"""A vote's calls one after another: the run's budget is checked before each, so its cap decides how
many it makes."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(tmp_path_factory.mktemp("budgets"), default_reply, KEYS, 40, ENV) as running:
        yield running


def client(replica, tenant: str):
    return get_client(url=replica.url, api_key=KEYS[tenant])


def openai_client(replica, tenant: str):
    from openai import OpenAI

    return OpenAI(base_url=f"{replica.url}/v1", api_key=KEYS[tenant], max_retries=0)


def next_midnight() -> datetime:
    return datetime.combine(
        datetime.now(UTC).date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC
    )


def check_retry_after(headers) -> None:
    """Retry-After: the whole seconds to 00:00 UTC."""
    expected = (next_midnight() - datetime.now(UTC)).total_seconds()
    assert abs(int(headers["retry-after"]) - expected) <= 5, (headers["retry-after"], expected)


def check_graph_refusal(exc: httpx.HTTPStatusError, tenant: str) -> None:
    assert exc.response.status_code == 429
    check_retry_after(exc.response.headers)
    body = exc.response.json()
    resets = next_midnight().strftime("%Y-%m-%dT%H:%M:%SZ")
    assert body["error"] == "insufficient_quota" and body["details"]["resets_at"] == resets
    assert (
        body["details"]["reason"].startswith("daily budget reached")
        and f"resets at {resets}" in body["message"]
    )
    assert body["details"]["tenant"] == tenant


async def test_a_tenant_past_its_budget_gets_429_everywhere_and_nothing_is_created_while_others_run(
    cluster,
):
    import openai

    a, b = cluster.live()
    acme = client(a, "acme")
    before = [await scrape(r) for r in (a, b)]
    # under budget: the run runs, its own max_cost capped at what the tenant has left ($0.05, all of
    # it), which cannot hold even its first request (~$0.07 a call, held at its worst case):
    # needs_review, "budget reached", nothing sent; a run stopped by a cap of all the day had left
    # marks the day reached
    thread = await acme.threads.create()
    await acme.runs.wait(
        thread["thread_id"], "solve", input={**VOTE, "max_cost": 3.0}, context=ONE_AT_A_TIME
    )
    (run,) = await acme.runs.list(thread["thread_id"])
    assert run["status"] == "success" and run["input"]["max_cost"] == 0.05
    assert run["output"]["status"] == "needs_review" and run["output"]["reason"].startswith(
        "budget reached"
    )
    assert "max_cost $0.05" in run["output"]["reason"]
    spent = run["output"]["spend"]
    assert (
        spent["cost_usd"] == 0
    )  # never past the day's budget: the request that would not fit was not sent
    assert sql(cluster, "SELECT exhausted FROM parallax_tenant_spend WHERE tenant = 'acme'") == [
        (True,)
    ]
    assert sql(
        cluster, "SELECT tokens, cost_usd::float8 FROM parallax_tenant_spend WHERE tenant = 'acme'"
    ) == [(spent["tokens"], pytest.approx(spent["cost_usd"]))]

    # past it: every way of starting a run, on both replicas, is 429 with the reason and the reset
    # time
    threads_before = len(await acme.threads.search(limit=100))
    runs_before = sql(cluster, "SELECT count(*) FROM runs WHERE user_id = 'acme'")
    crons_before = sql(cluster, "SELECT count(*) FROM crons WHERE user_id = 'acme'")
    for replica in (a, b):
        sdk = client(replica, "acme")
        attempts = [
            sdk.runs.wait(thread["thread_id"], "solve", input=DIRECT),
            sdk.runs.create(thread["thread_id"], "solve", input=DIRECT),
            sdk.runs.wait(None, "solve", input=DIRECT),
            sdk.crons.create("solve", schedule=YEARLY, input=DIRECT),
            sdk.crons.create_for_thread(
                thread["thread_id"], "solve", schedule=YEARLY, input=DIRECT
            ),
        ]
        for attempt in attempts:
            with pytest.raises(httpx.HTTPStatusError) as refused:
                await attempt
            check_graph_refusal(refused.value, "acme")
        with pytest.raises(httpx.HTTPStatusError) as refused:
            async for _ in sdk.runs.stream(None, "solve", input=DIRECT):
                pass
        check_graph_refusal(refused.value, "acme")
        # /v1: OpenAI's error JSON, an insufficient_quota RateLimitError for the openai SDK
        for stream in (False, True):
            with pytest.raises(openai.RateLimitError) as quota:
                openai_client(replica, "acme").chat.completions.create(
                    model="parallax-direct",
                    messages=[{"role": "user", "content": "What is 6 * 7?"}],
                    stream=stream,
                )
            assert quota.value.status_code == 429
            check_retry_after(quota.value.response.headers)
            assert set(quota.value.body) == {"message", "type", "param", "code"}
            assert (quota.value.body["type"], quota.value.body["code"]) == (
                "insufficient_quota",
                "daily_budget_exceeded",
            )
            assert "daily budget reached" in quota.value.body["message"]
            assert next_midnight().strftime("%Y-%m-%dT%H:%M:%SZ") in quota.value.body["message"]
    # the v2 protocol's run.start, over HTTP (POST /threads/{id}/commands) and over the WebSocket
    for transport in ("sse", "websocket"):
        with pytest.raises(Exception) as refused:  # noqa: PT011 - httpx's over HTTP, the SDK's protocol error else
            async with client(b, "acme").threads.stream(
                thread_id=thread["thread_id"],
                assistant_id="solve",
                transport=transport,
                headers={"x-api-key": KEYS["acme"]},
            ) as v2:
                await v2.run.start(input=DIRECT)
        # the SDK sends run.start over HTTP on either transport
        check_graph_refusal(refused.value, "acme")
    # a command sent on the socket itself is answered with the protocol's error envelope
    import websockets

    socket_url = b.url.replace("http://", "ws://") + f"/threads/{thread['thread_id']}/stream/events"
    async with websockets.connect(
        socket_url, additional_headers={"x-api-key": KEYS["acme"]}
    ) as socket:
        await socket.send(
            json.dumps(
                {
                    "id": 7,
                    "method": "run.start",
                    "params": {"assistant_id": "solve", "input": DIRECT},
                }
            )
        )
        answer = json.loads(await asyncio.wait_for(socket.recv(), 10))
    assert (answer["type"], answer["id"], answer["error"]) == ("error", 7, "insufficient_quota")
    assert "daily budget reached" in answer["message"]
    # /mcp: a tool error saying why and when it resets (not "busy, retry after 43000 s")
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['acme']}"}, timeout=60)
    async with Client(streamable_http_client(f"{a.url}/mcp", http_client=http)) as mcp:
        tool = await mcp.call_tool("solve", DIRECT)
    assert tool.is_error and "daily budget reached" in tool.content[0].text
    assert next_midnight().strftime("%Y-%m-%dT%H:%M:%SZ") in tool.content[0].text
    # nothing half-written: no run, no thread, no cron, no thread state
    assert len(await acme.threads.search(limit=100)) == threads_before
    assert sql(cluster, "SELECT count(*) FROM runs WHERE user_id = 'acme'") == runs_before
    assert sql(cluster, "SELECT count(*) FROM crons WHERE user_id = 'acme'") == crons_before
    assert len(await acme.runs.list(thread["thread_id"])) == 1

    # another tenant is unaffected, on both replicas and both faces
    beta = await client(b, "beta").runs.wait(None, "solve", input=DIRECT)
    assert beta["answer"] == "42"
    reply = openai_client(a, "beta").chat.completions.create(
        model="parallax-direct", messages=[{"role": "user", "content": "What is 6 * 7?"}]
    )
    assert reply.choices[0].message.content == "42"
    # and so is a tenant without a budget, whose runs are not capped
    free = client(a, "free")
    free_thread = await free.threads.create()
    await free.runs.wait(free_thread["thread_id"], "solve", input=DIRECT)
    assert "max_cost" not in (await free.runs.list(free_thread["thread_id"]))[0]["input"]

    after = [await scrape(r) for r in (a, b)]
    refusals = 'parallax_daily_budget_refusals_total{face="%s"}'
    assert total(after, refusals % "graph_api") - total(before, refusals % "graph_api") == 16
    assert total(after, refusals % "openai") - total(before, refusals % "openai") == 4
    for replica in after:  # each replica reads the shared ledger
        assert replica['parallax_tenant_spend_tokens{tenant="acme"}'] == spent["tokens"]
        assert replica['parallax_tenant_spend_usd{tenant="acme"}'] == pytest.approx(
            spent["cost_usd"]
        )


async def test_a_crons_run_is_capped_under_the_budget_and_refused_past_it(cluster):
    a, b = cluster.live()
    sdk = client(a, "cronny")
    thread_id = (await sdk.threads.create())["thread_id"]
    first = await sdk.crons.create_for_thread(thread_id, "solve", schedule=YEARLY, input=DIRECT)
    await sdk.runs.join(thread_id, first["run_id"])
    (run,) = await sdk.runs.list(thread_id)
    assert (
        run["status"] == "success" and run["input"]["max_cost"] == 0.05
    )  # capped as Aegra stored it
    assert run["output"]["spend"]["cost_usd"] == 0 and run["output"]["reason"].startswith(
        "budget reached"
    )
    (cron,) = await client(b, "cronny").crons.search(thread_id=thread_id)
    sql(
        cluster, "UPDATE crons SET next_run_date = now() WHERE cron_id = %s", cron["cron_id"]
    )  # the scheduler fires it
    deadline = time.monotonic() + 60
    while len(runs := await sdk.runs.list(thread_id)) < 2:
        assert time.monotonic() < deadline, runs
        await asyncio.sleep(0.2)
    refused = next(r for r in runs if r["run_id"] != first["run_id"])
    assert refused["status"] == "error" and refused["error_message"].startswith(
        "daily budget reached"
    )
    assert next_midnight().strftime("%Y-%m-%dT%H:%M:%SZ") in refused["error_message"]
    assert sql(cluster, "SELECT count(*) FROM parallax_run_charges WHERE tenant = 'cronny'") == [
        (1,)
    ]


async def test_many_runs_of_one_tenant_at_once_on_two_replicas_hold_the_budget_and_are_charged_once(
    cluster,
):
    """Six callers, three per replica, each starting a vote run as soon as its last one ended, until
    refused. Each run is capped at what the tenant had left when admitted and never spends past its
    cap; the day ends past the budget by at most what the runs in flight at the crossing could still
    spend (each: its cap), or, before a crossing, when a run its cap stopped marks it reached; then
    every request on either replica is refused; the ledger holds each run once and sums to the runs'
    own `spend`."""
    a, b = cluster.live()
    admitted: list[tuple[str, str]] = []
    refused = 0

    async def caller(replica) -> None:
        nonlocal refused
        sdk = client(replica, "crowd")
        for _ in range(20):
            thread_id = (await sdk.threads.create())["thread_id"]
            try:
                run = await sdk.runs.create(thread_id, "solve", input=VOTE, context=ONE_AT_A_TIME)
            except httpx.HTTPStatusError as exc:
                check_graph_refusal(exc, "crowd")
                refused += 1
                return
            admitted.append((thread_id, run["run_id"]))
            await sdk.runs.join(thread_id, run["run_id"])
        raise AssertionError("20 runs in a row were admitted: the budget never held")

    await asyncio.gather(*(caller(r) for r in (a, b, a, b, a, b)))
    assert refused == 6 and len(admitted) >= 6

    runs = []
    for thread_id, run_id in admitted:
        run = await client(a, "crowd").runs.get(thread_id, run_id)
        assert run["status"] == "success"
        runs.append(run)
    calls = [branch["tokens"]["total"] for run in runs for branch in run["output"]["branches"]]
    biggest_call = max(calls)
    by_id = {run["run_id"]: run for run in runs}
    for run in (
        runs
    ):  # each run held its cap (the run's own budget machinery), and said so when it stopped
        cap, spent = run["input"]["max_tokens"], run["output"]["spend"]["tokens"]
        assert 0 < cap <= CROWD_TOKENS and spent <= cap, (cap, spent, biggest_call)
    natural = max(run["output"]["spend"]["tokens"] for run in runs)
    for run in (
        runs
    ):  # a run stopped by its cap says so (whether one is depends on what was left when it came)
        if run["output"]["spend"]["tokens"] < natural:
            assert (
                run["output"]["reason"].startswith("budget reached")
                and run["output"]["status"] == "needs_review"
            )

    # charged once each, by whichever replica ran it, summing to the runs' own spend
    ledger = sql(
        cluster,
        "SELECT run_id, tokens, charged_at FROM parallax_run_charges WHERE tenant = 'crowd' "
        "ORDER BY charged_at, run_id",
    )
    assert sorted(r[0] for r in ledger) == sorted(by_id)
    assert all(tokens == by_id[run_id]["output"]["spend"]["tokens"] for run_id, tokens, _ in ledger)
    day_total = sum(r[1] for r in ledger)
    assert sql(
        cluster, "SELECT tokens, runs FROM parallax_tenant_spend WHERE tenant = 'crowd'"
    ) == [(day_total, len(runs))]

    # a run's end written again (a replayed finalization) charges nothing more
    replayed = runs[0]["run_id"]
    sql(cluster, "UPDATE runs SET status = 'running' WHERE run_id = %s", replayed)
    sql(cluster, "UPDATE runs SET status = 'success' WHERE run_id = %s", replayed)
    assert sql(
        cluster, "SELECT tokens, runs FROM parallax_tenant_spend WHERE tenant = 'crowd'"
    ) == [(day_total, len(runs))]
    assert sql(
        cluster, "SELECT count(*) FROM parallax_run_charges WHERE run_id = %s", replayed
    ) == [(1,)]

    # the bound: past the budget by at most what the runs not yet charged at the crossing could
    # spend; without a crossing, a run its cap stopped marked the day reached
    cumulative, crossing = 0, None
    for n, (_, tokens, _) in enumerate(ledger):
        cumulative += tokens
        if cumulative >= CROWD_TOKENS:
            crossing = n
            break
    if crossing is None:
        assert sql(
            cluster, "SELECT exhausted FROM parallax_tenant_spend WHERE tenant = 'crowd'"
        ) == [(True,)]
        crossing = len(ledger) - 1
    in_flight = [by_id[run_id] for run_id, _, _ in ledger[crossing:]]
    assert day_total - CROWD_TOKENS <= sum(r["input"]["max_tokens"] for r in in_flight)
    crossed_at = ledger[crossing][2]
    created = dict(sql(cluster, "SELECT run_id, created_at FROM runs WHERE user_id = 'crowd'"))
    # a run admitted saw every charge committed well before it was created (on either replica): its
    # cap says so
    for run in runs:
        seen = CROWD_TOKENS - run["input"]["max_tokens"]
        earlier = sum(
            tokens
            for run_id, tokens, at in ledger
            if at < created[run["run_id"]] - timedelta(seconds=1)
        )
        assert seen >= earlier, (run["run_id"], seen, earlier)
        assert created[run["run_id"]] < crossed_at + timedelta(
            seconds=1
        )  # none admitted once the day was spent

    # and now nobody of the tenant gets in, on either replica, however many ask at once
    async def one(replica) -> int:
        try:
            await client(replica, "crowd").runs.create(None, "solve", input=VOTE)
        except httpx.HTTPStatusError as exc:
            return exc.response.status_code
        return 200

    assert await asyncio.gather(*(one(r) for r in (a, b) * 5)) == [429] * 10
    assert sql(cluster, "SELECT count(*) FROM runs WHERE user_id = 'crowd'") == [(len(runs),)]


async def charge_of(cluster, run_id: str) -> list[tuple]:
    """The run's charge, once made: the replica that ran it charges it just after it stores the
    run's end."""
    deadline = time.monotonic() + 10
    while (
        not (
            found := sql(
                cluster,
                "SELECT tokens, cost_usd::float8 FROM parallax_run_charges WHERE run_id = %s",
                run_id,
            )
        )
        and time.monotonic() < deadline
    ):
        await asyncio.sleep(0.1)
    return found


async def test_a_cancelled_run_and_a_chat_run_are_charged_what_their_calls_cost(cluster):
    """Runs that end without a settled `spend` are charged the model calls their replica saw: a vote
    cancelled after its first calls (else a tenant could cancel each run just before its end and
    spend without limit), and a run of the chat graph."""
    a, b = cluster.live()
    sdk = client(b, "beta")
    thread_id = (await sdk.threads.create())["thread_id"]
    cluster.set_model(latency_ms=1500)
    try:
        started = time.time()
        run = await sdk.runs.create(thread_id, "solve", input=VOTE, context=ONE_AT_A_TIME)
        deadline = time.monotonic() + 30
        while not [e for e in cluster.model.log() if e["time"] >= started and e["status"] == 200]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        await client(a, "beta").runs.cancel(thread_id, run["run_id"], wait=True)
    finally:
        cluster.set_model(latency_ms=20)
    assert (await sdk.runs.get(thread_id, run["run_id"]))["status"] == "interrupted"
    answered = [e for e in cluster.model.log() if e["time"] >= started and e["status"] == 200]
    assert 1 <= len(answered) < VOTES
    charged = await charge_of(cluster, run["run_id"])
    assert charged == [
        (72 * len(answered), pytest.approx(72 * len(answered) * PRICE / 1e6))
    ]  # 64 + 8 tokens a call

    chat_thread = (await sdk.threads.create())["thread_id"]
    chat = await sdk.runs.wait(
        chat_thread, "chat", input={"messages": [{"type": "human", "content": "What is 6 * 7?"}]}
    )
    assert chat["messages"][-1]["content"]
    (chat_run,) = await sdk.runs.list(chat_thread)
    assert "spend" not in chat_run["output"]  # nothing settled: the charge is what the replica saw
    ((tokens, _),) = await charge_of(cluster, chat_run["run_id"])
    assert tokens > 0
    day = sql(cluster, "SELECT sum(tokens) FROM parallax_run_charges WHERE tenant = 'beta'")
    assert sql(cluster, "SELECT tokens FROM parallax_tenant_spend WHERE tenant = 'beta'") == day


async def test_a_run_stopped_by_interrupt_before_and_resumed_is_charged_once_in_all(cluster):
    """The stopped run is charged its calls as it stops; the run that resumes it settles a `spend`
    that counts them too, and is charged only the rest: a tenant pays a resumed run's work once."""
    a, b = cluster.live()
    thread_id = (await client(a, "beta").threads.create())["thread_id"]
    stopped = await client(a, "beta").runs.create(
        thread_id, "solve", input=VOTE, interrupt_before=["record_trace"]
    )
    await client(a, "beta").runs.join(thread_id, stopped["run_id"])
    stopped = await client(a, "beta").runs.get(thread_id, stopped["run_id"])
    assert (
        stopped["status"] == "success" and "spend" not in stopped["output"]
    )  # how Aegra ends it: unsettled
    assert (await client(a, "beta").threads.get_state(thread_id))["next"] == ["record_trace"]
    ((stopped_tokens, stopped_cost),) = await charge_of(cluster, stopped["run_id"])
    assert (
        stopped_tokens >= 72 * 2 and stopped_tokens % 72 == 0
    )  # its votes' calls (72 tokens each), as it stopped

    # no input of its own: it carries on from where the run stopped (Aegra wants the checkpoint
    # named)
    latest = (await client(b, "beta").threads.get_state(thread_id))["checkpoint"]["checkpoint_id"]
    resumed = await client(b, "beta").runs.create(thread_id, "solve", checkpoint_id=latest)
    await client(b, "beta").runs.join(thread_id, resumed["run_id"])
    run = await client(b, "beta").runs.get(thread_id, resumed["run_id"])
    assert run["status"] == "success"
    spend = run["output"]["spend"]
    assert (
        spend["tokens"] == stopped_tokens
    )  # its spend counts the stopped run's calls: it made none of its own
    assert await charge_of(cluster, resumed["run_id"]) == [(0, 0.0)]
    assert stopped_cost == pytest.approx(spend["cost_usd"])


def test_a_resumed_runs_charge_leaves_out_what_the_runs_it_resumes_were_charged_in_either_order(
    cluster,
):
    """Order-independence of the two charges, on runs written straight into the ledger's tables (an
    `error` run made `success` fires the charge trigger as Aegra's end of a run does): the stopped
    run's own charge may come after the resumed run's (its replica was slow); a new input after an
    interrupted run starts new work, charged whole.
    """

    def thread(*runs: tuple[str, str | None]) -> list[str]:
        thread_id = f"ledger-{uuid.uuid4()}"
        sql(cluster, "INSERT INTO thread (thread_id, user_id) VALUES (%s, 'ledger')", thread_id)
        ids = []
        for offset, (status, given) in enumerate(runs):
            ids.append(run_id := str(uuid.uuid4()))
            sql(
                cluster,
                "INSERT INTO runs (run_id, thread_id, status, input, user_id, created_at,"
                " execution_params) VALUES (%s, %s, %s, %s::jsonb, 'ledger', now() + %s * interval"
                " '1 second', '{\"graph_id\": \"solve\"}')",
                run_id,
                thread_id,
                status,
                given,
                offset,
            )
        return ids

    def succeed(run_id: str, tokens: int) -> None:
        sql(
            cluster,
            "UPDATE runs SET status = 'success', output = %s::jsonb WHERE run_id = %s",
            json.dumps({"spend": {"tokens": tokens, "cost_usd": tokens / 1000}}),
            run_id,
        )

    def ended(run_id: str, tokens: int) -> None:
        sql(
            cluster,
            "SELECT parallax_charge_ended(%s, %s::bigint, %s::numeric)",
            run_id,
            tokens,
            tokens / 1000,
        )

    def charged(*run_ids: str) -> list[int]:
        rows = dict(
            sql(
                cluster,
                "SELECT run_id, tokens FROM parallax_run_charges WHERE run_id = ANY(%s)",
                list(run_ids),
            )
        )
        return [rows[run_id] for run_id in run_ids]

    task = json.dumps(VOTE)
    try:
        first, again, last = thread(
            ("interrupted", task), ("success", None), ("error", None)
        )  # review, then before
        ended(first, 200)
        ended(again, 50)
        succeed(last, 300)
        assert charged(first, again, last) == [200, 50, 50]
        stopped, resumed = thread(("interrupted", task), ("error", "null"))
        succeed(resumed, 300)
        ended(stopped, 200)  # late: its calls are in the resumed run's charge
        assert charged(stopped, resumed) == [0, 300]
        stopped, fresh = thread(("interrupted", task), ("error", task))
        ended(stopped, 200)
        succeed(fresh, 300)
        assert charged(stopped, fresh) == [200, 300]
        assert sql(cluster, "SELECT tokens FROM parallax_tenant_spend WHERE tenant = 'ledger'") == [
            (1100,)
        ]
    finally:
        sql(cluster, "DELETE FROM thread WHERE user_id = 'ledger'")
        sql(cluster, "DELETE FROM parallax_run_charges WHERE tenant = 'ledger'")
        sql(cluster, "DELETE FROM parallax_tenant_spend WHERE tenant = 'ledger'")
