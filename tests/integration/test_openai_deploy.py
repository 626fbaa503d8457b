"""The OpenAI-compatible face (`/v1`) of `parallax serve`: two Aegra replicas on PostgreSQL and
Redis, driven by the official openai SDK and LangChain's ChatOpenAI, with the scripted fault server
as the model.

Each completion must be a run of the deployment, not a side path: a thread any replica can read,
a trace in the tenant's store, the tenant from the key (401 for a bad one), 429 with Retry-After
under the tenant's backpressure, the `parallax_*` metrics, and a replica killed mid-run losing
nothing. Needs the server venv (`.ci/run` runs it with `-m deploy`; a skip fails in CI).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import httpx
import pytest

from testkit import openai_checks
from testkit.aegra_cluster import fill_pending, two_replicas
from tests.integration.test_deploy import scrape, total

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta", "busy": "key-busy"}
MAX_PENDING = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(
        tmp_path_factory.mktemp("openai-deploy"),
        openai_checks.reply,
        KEYS,
        MAX_PENDING,
        {"PARALLAX_MAX_TOKENS": "128"},
    ) as running:
        yield running


def openai_client(replica, tenant: str = "acme", **kwargs):
    from openai import OpenAI

    return OpenAI(
        base_url=f"{replica.url}/v1", api_key=KEYS.get(tenant, tenant), max_retries=0, **kwargs
    )


def sdk(replica, tenant: str = "acme"):
    from langgraph_sdk import get_client

    return get_client(url=replica.url, api_key=KEYS[tenant])


async def test_openai_sdk_and_langchain_on_both_replicas_make_runs_of_the_deployment(cluster):
    a, b = cluster.live()
    openai_checks.check_models(openai_client(a))
    plain = openai_checks.check_plain(openai_client(a))
    streamed = openai_checks.check_stream(openai_client(b))
    openai_checks.check_parse(openai_client(a))
    openai_checks.check_langchain(f"{b.url}/v1", KEYS["acme"])
    openai_checks.check_refusals(openai_client(b))
    # runs of the deployment: threads any replica reads through langgraph-sdk, traces in the
    # tenant's store
    for extra, other in ((plain, b), (streamed, a)):
        state = await sdk(other).threads.get_state(extra["thread_id"])
        assert state["values"]["trace_id"] == extra["trace_id"] and state["values"][
            "vote_counts"
        ] == {"42": 3}
        runs = await sdk(other).runs.list(extra["thread_id"])
        assert [(r["run_id"], r["status"]) for r in runs] == [(extra["run_id"], "success")]
    stored = await sdk(b).store.search_items(["traces"], limit=50)
    assert {plain["trace_id"], streamed["trace_id"]} <= {i["key"] for i in stored["items"]}
    assert all(i["namespace"] == ["traces", "acme"] for i in stored["items"])
    # another tenant's key sees neither the threads nor the traces
    from langgraph_sdk.errors import NotFoundError

    with pytest.raises(NotFoundError):
        await sdk(a, "beta").threads.get_state(plain["thread_id"])
    assert (await sdk(a, "beta").store.search_items(["traces"], limit=50))["items"] == []


def test_a_typed_vote_asks_in_waves_on_the_deployment(cluster):
    a, b = cluster.replicas[:2]
    openai_checks.check_typed_vote_stops_after_a_settled_wave(openai_client(a), cluster.model)
    openai_checks.check_typed_vote_asks_a_second_wave_for_a_split_field(
        openai_client(b), cluster.model
    )


async def test_the_key_names_the_tenant_and_a_bad_key_is_401_in_openai_error_json(cluster):
    import openai

    a, b = cluster.live()
    for replica in (a, b):
        with pytest.raises(openai.AuthenticationError) as refused:
            openai_client(replica, "not-a-key").chat.completions.create(
                model="parallax-direct", messages=[{"role": "user", "content": "What is 6 * 7?"}]
            )
        assert refused.value.status_code == 401
        assert (refused.value.body["type"], refused.value.body["code"]) == (
            "invalid_request_error",
            "invalid_api_key",
        )
        assert "Authorization: Bearer" in refused.value.body["message"]
        with pytest.raises(openai.AuthenticationError):
            openai_client(replica, "not-a-key").models.list()
        with pytest.raises(openai.AuthenticationError):
            openai_client(replica, "not-a-key").models.retrieve("parallax-vote")
    async with httpx.AsyncClient(trust_env=False) as h:  # no key at all
        r = await h.post(
            f"{a.url}/v1/chat/completions",
            json={
                "model": "parallax-direct",
                "messages": [{"role": "user", "content": "What is 6 * 7?"}],
            },
        )
    assert r.status_code == 401 and set(r.json()["error"]) == {"message", "type", "param", "code"}
    beta = openai_client(b, "beta").chat.completions.create(
        model="parallax-direct", messages=[{"role": "user", "content": "What is 6 * 7?"}]
    )
    stored = await sdk(a, "beta").store.search_items(["traces"], limit=50)
    assert [i["key"] for i in stored["items"]] == [
        beta.parallax["trace_id"]
    ]  # under beta, from beta's key


async def test_backpressure_is_429_with_retry_after_and_the_metrics_count_openai_runs(cluster):
    import openai

    a, b = cluster.live()
    before = [await scrape(r) for r in (a, b)]
    openai_checks.check_plain(openai_client(b))
    after = [await scrape(r) for r in (a, b)]
    runs_ok, votes_ok = (
        'parallax_runs_total{graph="solve",status="ok"}',
        'parallax_branches_total{kind="vote",status="ok"}',
    )
    assert total(after, runs_ok) - total(before, runs_ok) == 1
    assert total(after, votes_ok) - total(before, votes_ok) == openai_checks.VOTES

    busy = sdk(a, "busy")
    cluster.set_model(latency_ms=1500)
    try:
        accepted = await fill_pending(busy, MAX_PENDING)
        threads_before = len(await busy.threads.search(limit=100))
        ask = {
            "model": "parallax-direct",
            "messages": [{"role": "user", "content": "What is 1 + 1?"}],
        }
        for replica, stream in ((b, False), (a, True)):
            with pytest.raises(openai.RateLimitError) as refused:
                openai_client(replica, "busy").chat.completions.create(**ask, stream=stream)
            assert (
                refused.value.status_code == 429
                and refused.value.response.headers["retry-after"] == "1"
            )
            assert (refused.value.body["type"], refused.value.body["code"]) == (
                "requests",
                "rate_limit_exceeded",
            )
            assert "runs pending or running" in refused.value.body["message"]
        assert (
            len(await busy.threads.search(limit=100)) == threads_before
        )  # a refused run leaves no thread behind
        # the openai SDK's own retries honour Retry-After: once the earlier runs finish, the request
        # gets through
        late = openai_client(a, "busy").with_options(max_retries=8).chat.completions.create(**ask)
        assert late.choices[0].message.content == "42"
        for thread_id, run_id in accepted:  # nothing accepted was dropped
            await busy.runs.join(thread_id, run_id)
            assert (await busy.runs.get(thread_id, run_id))["status"] == "success"
    finally:
        cluster.set_model(latency_ms=20)


async def test_a_replica_killed_mid_run_loses_nothing_of_an_openai_run(cluster):
    """A streamed completion through A; the replica executing its run is killed after two of six
    votes answered. Whichever replica that was, the run ends on the survivor with every vote
    answered exactly once.
    """
    from openai import AsyncOpenAI

    a, b = cluster.live()
    cluster.model.reset()
    cluster.set_model(latency_ms=1500)
    client = AsyncOpenAI(base_url=f"{a.url}/v1", api_key=KEYS["acme"], max_retries=0)
    seen: list = []

    async def consume(stream) -> str:
        async for chunk in stream:
            seen.append(chunk)
        return "".join(c.choices[0].delta.content or "" for c in seen if c.choices)

    try:
        stream = await client.chat.completions.create(
            model="parallax-vote",
            messages=[{"role": "user", "content": "What is 6 * 7?"}],
            stream=True,
            extra_body={
                "parallax": {
                    "votes": 6,
                    "context": {"max_concurrency": 2, "max_attempts": 1, "early_stop": False},
                }
            },
        )
        reading = asyncio.create_task(consume(stream))
        deadline = time.monotonic() + 60
        while not seen:
            assert time.monotonic() < deadline, "no first chunk"
            await asyncio.sleep(0.05)
        thread_id, run_id = seen[0].parallax["thread_id"], seen[0].parallax["run_id"]
        victim = None
        while (
            victim is None
            or sum(e["status"] == 200 for e in cluster.model.log() if e.get("messages_hash")) < 2
        ):
            assert time.monotonic() < deadline, "the run never got two answers"
            victim = victim or cluster.executing_replica(run_id)
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the two finished votes reach the checkpoint
        victim.kill()
        finished = {
            e["temperature"]
            for e in cluster.model.log()
            if e.get("messages_hash") and e["status"] == 200
        }
        survivor = b if victim is a else a
        await sdk(survivor).runs.join(thread_id, run_id)
        status = (await sdk(survivor).runs.get(thread_id, run_id))["status"]
        values = (await sdk(survivor).threads.get_state(thread_id))["values"]
        streamed = await asyncio.gather(reading, return_exceptions=True)
    finally:
        cluster.set_model(latency_ms=20)
    assert status == "success" and values["vote_counts"] == {"42": 6} and values["status"] == "ok"
    calls = Counter(
        e["temperature"]
        for e in cluster.model.log()
        if e.get("messages_hash") and e["status"] == 200
    )
    assert len(calls) == 6 and sum(calls.values()) == 6, calls  # every vote answered once
    assert len(finished) == 2 and all(calls[t] == 1 for t in finished), (
        calls
    )  # finished votes were not called again
    if victim is b:  # the caller's connection was on A, which lived: its stream carried the answer
        assert streamed == ["42"], streamed
    print(
        "openai kill test: killed"
        f" {'the front replica' if victim is a else 'the executing replica'} ({victim.port});"
        f" stream {'ended with ' + repr(streamed[0]) if victim is b else 'broke with the front'}"
    )
    cluster.start_replica(victim.port)
