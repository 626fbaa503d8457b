"""The Agent Server API on `parallax serve` (two replicas, PostgreSQL, Redis): what Aegra alone
would accept and not do is refused by name or done (server/conformance.py), and langgraph-sdk's
ordinary calls still work.

Each refused field is sent as langgraph-sdk sends it, and the test checks both halves: a 422 naming
the field with a message saying what to do instead, and no run started. Each implemented one behaves
as LangGraph documents it: `if_not_exists` ("reject", the default: 404 and no thread; "create": the
run makes the thread), `threads.count`, `assistants.get_subgraphs(namespace=...)`. docs/deploy.md,
"Agent Protocol conformance", has the table.
"""

from __future__ import annotations

import uuid

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from testkit.aegra_cluster import sql, two_replicas
from testkit.fault_server import default_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta"}
DIRECT = {"task": "What is 2 + 2?", "mode": "direct"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(tmp_path_factory.mktemp("conformance"), default_reply, KEYS, 20) as running:
        yield running


def client(replica, tenant: str = "acme"):
    return get_client(url=replica.url, api_key=KEYS[tenant])


def key(tenant: str = "acme") -> dict[str, str]:
    return {"x-api-key": KEYS[tenant]}


async def refused_by(call) -> tuple[int, str]:
    """(status, what the client raised, body included) of a call that must fail: langgraph-sdk
    raises its typed errors for most calls and httpx's HTTPStatusError (the body as a note) for
    runs.wait."""
    with pytest.raises(httpx.HTTPStatusError) as raised:
        await call
    error = raised.value
    return error.response.status_code, " ".join(
        [str(error), str(getattr(error, "body", "")), *getattr(error, "__notes__", [])]
    )


def runs_of(cluster, thread_id: str) -> int:
    return sql(cluster, "SELECT count(*) FROM runs WHERE thread_id = %s", thread_id)[0][0]


REFUSED_RUN_FIELDS = [
    ("runs", {"after_seconds": 30}, "after_seconds", "cron"),
    ("runs/stream", {"feedback_keys": ["correct"]}, "feedback_keys", "feedback graph"),
    ("runs/wait", {"langsmith_tracer": {"project_name": "p"}}, "langsmith_tracer", "OpenTelemetry"),
    ("runs/wait", {"on_disconnect": "cancel"}, "on_disconnect", "/wait"),
    ("runs", {"if_not_exists": "sometimes"}, "if_not_exists", '"create"'),
]


@pytest.mark.parametrize(("route", "extra", "field", "says"), REFUSED_RUN_FIELDS)
async def test_a_run_field_aegra_would_drop_is_refused_by_name_and_no_run_starts(
    cluster, route, extra, field, says
):
    a, b = cluster.live()
    thread = await client(a).threads.create()
    async with httpx.AsyncClient(base_url=b.url, headers=key(), timeout=30) as h:
        answer = await h.post(
            f"/threads/{thread['thread_id']}/{route}",
            json={"assistant_id": "solve", "input": DIRECT, **extra},
        )
        stateless = await h.post(
            f"/{route}", json={"assistant_id": "solve", "input": DIRECT, **extra}
        )
    for got in (answer, stateless):
        assert got.status_code == 422, got.text
        body = got.json()
        assert (
            body["details"]["field"] == field
            and body["message"].startswith(field)
            and says in body["message"]
        )
    assert runs_of(cluster, thread["thread_id"]) == 0


async def test_the_sdk_raises_the_refusal_with_its_reason(cluster):
    a, _ = cluster.live()
    sdk = client(a)
    thread = await sdk.threads.create()
    with pytest.raises(UnprocessableEntityError) as refused:
        await sdk.runs.create(thread["thread_id"], "solve", input=DIRECT, after_seconds=60)
    assert "after_seconds is not supported" in str(refused.value.body)
    status, said = await refused_by(
        sdk.runs.wait(thread["thread_id"], "solve", input=DIRECT, on_disconnect="cancel")
    )
    assert status == 422 and "is not supported on /wait" in said and "on_disconnect" in said
    with pytest.raises(UnprocessableEntityError) as refused:
        await sdk.store.search_items(["notes"], query="what did I write")
    assert "semantic search" in str(refused.value.body)
    with pytest.raises(UnprocessableEntityError) as refused:
        await sdk.store.put_item(["notes"], "k", {"v": 1}, index=["v"])
    assert "no embedding index" in str(refused.value.body)
    assert await sdk.store.get_item(["notes"], "k") is None  # the refused put was not stored
    with pytest.raises(UnprocessableEntityError) as refused:
        await sdk.threads.search(ids=[thread["thread_id"]])
    assert "ids is not supported" in str(refused.value.body)
    assert runs_of(cluster, thread["thread_id"]) == 0


async def test_a_thread_created_with_supersteps_is_refused_and_not_created(cluster):
    a, _ = cluster.live()
    thread_id = str(uuid.uuid4())
    with pytest.raises(UnprocessableEntityError) as refused:
        await client(a).threads.create(
            thread_id=thread_id,
            graph_id="solve",
            supersteps=[{"updates": [{"values": {"tenant": "beta"}, "as_node": "entry"}]}],
        )
    assert "supersteps is refused" in str(refused.value.body)
    with pytest.raises(NotFoundError):
        await client(a).threads.get(thread_id)


async def test_the_sdks_ordinary_calls_with_their_defaults_run(cluster):
    a, b = cluster.live()
    sdk = client(a)
    thread = await sdk.threads.create(metadata={"suite": "ordinary"})
    out = await sdk.runs.wait(
        thread["thread_id"],
        "solve",
        input=DIRECT,
        on_disconnect="continue",
        durability="sync",
        after_seconds=0,
        if_not_exists="reject",
    )
    assert out["answer"]
    parts = [
        p
        async for p in client(b).runs.stream(
            thread["thread_id"],
            "solve",
            input=DIRECT,
            stream_resumable=True,
            stream_subgraphs=False,
            feedback_keys=[],
        )
    ]
    values = [p.data for p in parts if p.event == "values"]
    assert values and values[-1]["answer"] and parts[-1].event == "end"
    stateless = await sdk.runs.wait(None, "solve", input=DIRECT, on_completion="delete")
    assert stateless["answer"]
    assert [t["thread_id"] for t in await sdk.threads.search(metadata={"suite": "ordinary"})] == [
        thread["thread_id"]
    ]


async def test_if_not_exists_reject_is_the_default_and_create_makes_the_thread(cluster):
    a, b = cluster.live()
    sdk = client(a)
    for given in ({}, {"if_not_exists": "reject"}):
        missing = str(uuid.uuid4())
        status, said = await refused_by(sdk.runs.wait(missing, "solve", input=DIRECT, **given))
        assert status == 404 and "if_not_exists" in said
        with pytest.raises(NotFoundError):
            await sdk.threads.get(missing)
    created = str(uuid.uuid4())
    out = await client(b).runs.wait(created, "solve", input=DIRECT, if_not_exists="create")
    assert out["answer"]
    assert (await sdk.threads.get(created))["thread_id"] == created
    assert runs_of(cluster, created) == 1
    other = await client(
        a, "beta"
    ).threads.create()  # another tenant's thread is not "missing": it is not found
    status, _ = await refused_by(
        sdk.runs.wait(other["thread_id"], "solve", input=DIRECT, if_not_exists="create")
    )
    assert status == 404
    assert runs_of(cluster, other["thread_id"]) == 0


async def test_threads_count_counts_what_the_search_would_find(cluster):
    a, b = cluster.live()
    batch = f"count-{uuid.uuid4()}"
    acme, beta = client(a), client(b, "beta")
    for _ in range(3):
        await acme.threads.create(metadata={"batch": batch})
    await beta.threads.create(metadata={"batch": batch})
    assert await acme.threads.count(metadata={"batch": batch}) == 3
    assert await client(b).threads.count(metadata={"batch": batch}, status="idle") == 3
    assert await acme.threads.count(metadata={"batch": batch}, status="busy") == 0
    assert await beta.threads.count(metadata={"batch": batch}) == 1
    assert await acme.threads.count() >= 3
    with pytest.raises(UnprocessableEntityError) as refused:
        await acme.threads.count(values={"answer": "4"})
    assert "values is not supported" in str(refused.value.body)


async def test_a_route_aegra_lacks_is_refused_by_name(cluster):
    a, _ = cluster.live()
    sdk = client(a)
    thread = await sdk.threads.create()
    with pytest.raises(UnprocessableEntityError) as refused:
        await sdk.runs.create_batch([{"assistant_id": "solve", "input": DIRECT}])
    assert "POST /runs/batch is not supported" in str(refused.value.body)
    with pytest.raises(UnprocessableEntityError) as refused:
        async for _ in await sdk.threads.join_stream(thread["thread_id"]):
            pass
    assert "/stream/events" in str(refused.value.body)
    assert (
        sql(
            cluster,
            "SELECT count(*) FROM runs WHERE user_id = 'acme' AND created_at > now() - interval '5"
            " s' AND thread_id = %s",
            thread["thread_id"],
        )[0][0]
        == 0
    )


async def test_a_subgraph_namespace_in_the_path_is_answered(cluster):
    a, _ = cluster.live()
    async with httpx.AsyncClient(base_url=a.url, headers=key(), timeout=30) as h:
        whole = await h.get("/assistants/chat/subgraphs")
        one = await h.get("/assistants/chat/subgraphs/review")
    assert whole.status_code == 200 and isinstance(whole.json(), dict)
    assert one.status_code == 200, one.text  # Aegra alone: 404 (no such route)
    assert set(one.json()) <= set(whole.json()) | {"review"}
