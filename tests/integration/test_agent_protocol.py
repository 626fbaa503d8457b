"""The Agent Protocol as LangGraph's clients expect it, on the deployed graph API (`parallax serve`,
two replicas).

One test per difference that langgraph-sdk's integration suite and Aegra's e2e suite found between
`parallax serve` and langgraph-api (docs/deploy.md, "Agent Protocol conformance";
bench/peer_suites.py runs those suites themselves): /ok, thread copy, crons that answer the cron,
graph ids as assistant ids, cancel answering the end state, store namespaces as written (and still
apart per tenant), the v3 thread stream of a graph with stream transformers of its own (SSE and
WebSocket) and RemoteGraph. The client is langgraph-sdk throughout, as a user's code would be. The
graph is testkit/protocol_graph.py (no model), served beside Parallax's own.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError, PermissionDeniedError

from testkit.aegra_cluster import ROOT, config_with, two_replicas
from testkit.fault_server import default_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta"}
GRAPH = "echo"
INPUT = {"items": []}
ENV = {"CRON_ENABLED": "true", "PARALLAX_CANCEL_WAIT_S": "10"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("protocol")
    config = config_with(work / "config", {GRAPH: f"{ROOT / 'testkit/protocol_graph.py'}:graph"})
    with two_replicas(work, default_reply, KEYS, 50, ENV, config=config) as running:
        yield running


def client(replica, tenant: str = "acme"):
    return get_client(url=replica.url, api_key=KEYS[tenant])


def test_ok_answers_without_a_key(cluster):
    for replica in cluster.replicas:
        answer = httpx.get(f"{replica.url}/ok", timeout=10)
        assert (answer.status_code, answer.json()["ok"]) == (200, True)
    assert (
        httpx.get(f"{cluster.replicas[0].url}/threads/{uuid.uuid4()}", timeout=10).status_code
        == 401
    )


async def test_a_thread_copy_has_the_state_and_history_and_goes_its_own_way(cluster):
    a, b = cluster.live()
    thread = await client(a).threads.create(metadata={"label": "original"})
    tid = thread["thread_id"]
    await client(a).runs.wait(tid, GRAPH, input={**INPUT, "ask": False})
    copied = await client(b).threads.copy(tid)
    cid = copied["thread_id"]

    assert cid != tid and copied["metadata"]["label"] == "original" and copied["status"] == "idle"
    original_state, copy_state = (
        await client(a).threads.get_state(tid),
        await client(b).threads.get_state(cid),
    )
    assert (
        copy_state["values"]
        == original_state["values"]
        == {
            "items": ["worked", "not asked"],
            "ask": False,
        }
    )
    assert (
        len(await client(b).threads.get_history(cid))
        == len(await client(a).threads.get_history(tid))
        > 1
    )
    # a run on the copy continues from the copied state; the original stays as it was
    await client(b).runs.wait(cid, GRAPH, input={**INPUT, "ask": False})
    assert (await client(a).threads.get_state(cid))["values"]["items"] == [
        "worked",
        "not asked",
    ] * 2
    assert (await client(a).threads.get_state(tid))["values"]["items"] == ["worked", "not asked"]
    # another tenant can neither copy the thread nor see the copy
    with pytest.raises(NotFoundError):
        await client(a, "beta").threads.copy(tid)
    with pytest.raises(NotFoundError):
        await client(a, "beta").threads.get(cid)


async def test_crons_create_answers_the_cron(cluster):
    a, b = cluster.live()
    created = await client(a).crons.create(
        GRAPH, schedule="0 0 1 1 *", input={**INPUT, "ask": False}, metadata={"label": "yearly"}
    )
    assert (
        created["cron_id"]
        and created["schedule"] == "0 0 1 1 *"
        and created["metadata"]["label"] == "yearly"
    )
    assert created["run_id"]  # the run Aegra starts at creation, named so it can be joined
    assert created["cron_id"] in {c["cron_id"] for c in await client(b).crons.search(limit=100)}
    thread = await client(b).threads.create()
    bound = await client(b).crons.create_for_thread(
        thread["thread_id"], GRAPH, schedule="0 0 1 1 *", input={**INPUT, "ask": False}
    )
    assert bound["thread_id"] == thread["thread_id"] and bound["cron_id"] != created["cron_id"]
    await client(a).runs.join(thread["thread_id"], bound["run_id"])
    for cron in (created, bound):
        await client(b).crons.delete(cron["cron_id"])
    assert {created["cron_id"], bound["cron_id"]}.isdisjoint(
        c["cron_id"] for c in await client(a).crons.search()
    )


async def test_a_graph_id_is_an_assistant_id_on_every_assistants_route(cluster):
    a, _ = cluster.live()
    default = (await client(a).assistants.search(graph_id=GRAPH, limit=1))[0]["assistant_id"]
    assert (await client(a).assistants.get(GRAPH))["assistant_id"] == default
    graph = await client(a).assistants.get_graph(GRAPH)
    assert {"work", "ask"} <= {n["id"] for n in graph["nodes"]}
    assert graph == await client(a).assistants.get_graph(default)
    assert (await client(a).assistants.get_schemas(GRAPH))["graph_id"] == GRAPH
    assert await client(a).assistants.get_subgraphs(GRAPH) == {}
    assert [v["assistant_id"] for v in await client(a).assistants.get_versions(GRAPH)] == [default]
    with pytest.raises(NotFoundError):  # an id that is neither an assistant nor a graph stays 404
        await client(a).assistants.get_graph("no-such-graph")


async def test_cancel_answers_the_state_the_run_ends_in(cluster):
    a, b = cluster.live()
    thread = await client(a).threads.create()
    tid = thread["thread_id"]
    run = await client(a).runs.create(tid, GRAPH, input={**INPUT, "sleep_s": 30})
    for _ in range(200):  # until a worker runs it (on either replica)
        if (await client(a).runs.get(tid, run["run_id"]))["status"] == "running":
            break
        await asyncio.sleep(0.05)
    cancelled = await client(b).runs.cancel(tid, run["run_id"])
    assert cancelled["status"] == "interrupted"
    assert (await client(a).runs.get(tid, run["run_id"]))["status"] == "interrupted"


async def test_store_namespaces_come_back_as_written_and_tenants_stay_apart(cluster):
    a, b = cluster.live()
    acme, beta = client(a), client(b, "beta")
    ns = ["notes", uuid.uuid4().hex[:8]]
    await acme.store.put_item(ns, key="k", value={"v": 1})
    # a bare internal prefix means the caller's own (["playbooks", "acme"]), which is read-only
    # through /store
    with pytest.raises(PermissionDeniedError, match="read-only through /store"):
        await acme.store.put_item(["playbooks"], key=f"p-{ns[1]}", value={"v": 2})
    assert await acme.store.get_item(["playbooks"], key=f"p-{ns[1]}") is None
    import psycopg  # the server venv's (the main venv collects this module without it)

    with psycopg.connect(
        cluster.database_url, autocommit=True
    ) as conn:  # as the learn graph would write it
        conn.execute(
            "INSERT INTO store (prefix, key, value) VALUES ('playbooks.acme', %s, '{\"v\": 2}')",
            (f"p-{ns[1]}",),
        )
    assert (await acme.store.get_item(["playbooks"], key=f"p-{ns[1]}"))["value"] == {"v": 2}

    item = await acme.store.get_item(ns, key="k")
    assert (item["namespace"], item["value"]) == (ns, {"v": 1})
    assert [i["namespace"] for i in (await acme.store.search_items(ns))["items"]] == [ns]
    assert (await acme.store.list_namespaces(prefix=["notes"]))["namespaces"] == [ns]
    everything = (await acme.store.list_namespaces(limit=1000))["namespaces"]
    assert ns in everything and ["playbooks", "acme"] in everything
    assert not [n for n in everything if n[:1] == ["users"]]
    assert ["notes"] in (await acme.store.list_namespaces(prefix=["notes"], max_depth=1))[
        "namespaces"
    ]

    # beta writes the same namespace: its own item, never acme's, and neither sees the other's
    await beta.store.put_item(ns, key="k", value={"v": "beta"})
    assert (await beta.store.get_item(ns, key="k"))["value"] == {"v": "beta"}
    assert (await acme.store.get_item(ns, key="k"))["value"] == {"v": 1}
    assert ["playbooks", "acme"] not in (await beta.store.list_namespaces(limit=1000))["namespaces"]
    assert (await beta.store.list_namespaces(prefix=["notes"]))["namespaces"] == [ns]
    with pytest.raises(PermissionDeniedError):
        await beta.store.search_items(["playbooks", "acme"])
    await acme.store.delete_item(ns, key="k")
    assert await acme.store.get_item(ns, key="k") is None
    assert (await beta.store.get_item(ns, key="k"))["value"] == {"v": "beta"}


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_the_thread_stream_of_a_graph_with_its_own_transformers(cluster, transport):
    a, _ = cluster.live()
    # the SDK's WebSocket handshake sends only the stream's own headers, not the client's api_key
    # (docs/deploy.md)
    async with client(a).threads.stream(
        assistant_id=GRAPH, transport=transport, headers={"x-api-key": KEYS["acme"]}
    ) as thread:
        await thread.run.start(input=INPUT)
        snapshots = [snapshot async for snapshot in thread.values]
        assert thread.interrupted and snapshots
        await thread.run.respond("yes")
        final = await thread.output
    assert final["items"] == ["worked", "asked:yes"]
    state = await client(a).threads.get_state(thread.thread_id)
    assert state["values"]["items"] == ["worked", "asked:yes"]


async def test_a_named_custom_event_reaches_its_extension_as_written(cluster):
    a, _ = cluster.live()
    async with client(a).threads.stream(assistant_id=GRAPH) as thread:
        await thread.run.start(input=INPUT)
        events = [event async for event in thread.extensions["progress"]]  # ends at the interrupt
    assert events == [{"name": "progress", "step": "work"}]


async def test_the_websocket_refuses_a_caller_without_a_key(cluster):
    import websockets

    url = (
        cluster.replicas[0].url.replace("http://", "ws://")
        + f"/threads/{uuid.uuid4()}/stream/events"
    )
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        async with websockets.connect(url):
            pass
    assert refused.value.response.status_code == 403


async def test_remote_graph_invokes_and_streams_the_served_graph(cluster):
    from langgraph.pregel.remote import RemoteGraph

    a, b = cluster.live()
    remote = RemoteGraph(GRAPH, url=a.url, api_key=KEYS["acme"])
    assert await remote.ainvoke({**INPUT, "ask": False}) == {
        "items": ["worked", "not asked"],
        "ask": False,
    }
    updates = [
        chunk
        async for chunk in RemoteGraph(GRAPH, url=b.url, api_key=KEYS["acme"]).astream(
            {**INPUT, "ask": False}, stream_mode="updates"
        )
    ]
    assert [next(iter(u)) for u in updates] == ["work", "ask"]


async def test_remote_graph_resumes_an_interrupt_as_soon_as_it_sees_it(cluster):
    """RemoteGraph's v3 resume sends the answer as `input`; sent the moment the interrupt shows,
    before Aegra has marked the thread interrupted, it must still resume (not start a run with "yes"
    as its input).
    """
    from langgraph.pregel.remote import RemoteGraph
    from langgraph.types import Command

    a, b = cluster.live()
    for _ in range(
        3
    ):  # the race is won or lost in milliseconds: try it more than once, each on a new thread
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        async with await RemoteGraph(GRAPH, url=a.url, api_key=KEYS["acme"]).astream_events(
            INPUT, config=config, version="v3"
        ) as stream:
            async for _ in stream.values:
                if await stream.interrupted():
                    break
            assert await stream.interrupted()
        async with await RemoteGraph(GRAPH, url=b.url, api_key=KEYS["acme"]).astream_events(
            Command(resume="yes"), config=config, version="v3"
        ) as stream:
            assert await stream.output() == {"items": ["worked", "asked:yes"]}
            assert await stream.interrupted() is False
