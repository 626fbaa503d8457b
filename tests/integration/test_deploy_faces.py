"""The chat graph and the MCP endpoint on the deployed graph API: two `parallax serve` replicas on
PostgreSQL and Redis, driven with langgraph-sdk and with the MCP SDK's Streamable HTTP client.

The model is the fault server with a scripted reply (testkit/review_model.py): sure answers
"4", and a split vote for a task that says "unsure", so the chat graph meets a review every time.
Needs the server venv; `.ci/run` runs it with `-m deploy` and fails when it is skipped.
"""

from __future__ import annotations

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from testkit.aegra_cluster import fill_pending, two_replicas
from testkit.conversation_model import FIVE_TURNS, TWO_TURNS, conversing
from testkit.extraction_model import scripted_votes
from testkit.readme_examples import python_block, run_block
from testkit.review_model import review_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta", "busy": "key-busy"}
MAX_PENDING = 2
SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
FILING = {
    "type": "object",
    "properties": {
        "revenue": {"type": "number"},
        "currency": {"type": "string"},
        "segments": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["revenue", "currency"],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(
        tmp_path_factory.mktemp("deploy-faces"), review_reply, KEYS, MAX_PENDING
    ) as running:
        yield running


def client(replica, tenant: str = "acme"):
    from langgraph_sdk import get_client

    return get_client(url=replica.url, api_key=KEYS[tenant])


def human(text: str) -> dict:
    return {"messages": [{"type": "human", "content": text}]}


def mcp_client(replica, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    return Client(streamable_http_client(f"{replica.url}/mcp", http_client=http))


async def test_chat_two_turns_on_one_thread_listed_by_graph_id_for_its_tenant_only(cluster):
    a, b = cluster.replicas[:2]
    thread = await client(a).threads.create()
    await client(a).runs.wait(thread["thread_id"], "chat", input=human("What is 2 + 2?"))
    second = await client(b).runs.wait(
        thread["thread_id"], "chat", input=human("And what is 3 + 1?")
    )
    assert [m["type"] for m in second["messages"]] == ["human", "ai", "human", "ai"]
    replies = [m for m in second["messages"] if m["type"] == "ai"]
    assert [m["content"] for m in replies] == ["4", "4"]
    assert [m["response_metadata"]["parallax"]["status"] for m in replies] == ["ok", "ok"]
    traces = (await client(a).store.search_items(["traces"], limit=20))["items"]
    assert {m["response_metadata"]["parallax"]["trace_id"] for m in replies} <= {
        i["key"] for i in traces
    }
    listed = await client(b).threads.search(metadata={"graph_id": "chat"}, limit=100)
    assert thread["thread_id"] in {
        t["thread_id"] for t in listed
    }  # Aegra stamps graph_id when a run starts
    assert thread["thread_id"] not in {
        t["thread_id"]
        for t in await client(b, "beta").threads.search(metadata={"graph_id": "chat"}, limit=100)
    }


async def test_a_review_asked_on_one_replica_is_edited_on_the_other_and_lands_on_the_trace(cluster):
    a, b = cluster.replicas[:2]
    thread = await client(a).threads.create()
    asked = await client(a).runs.wait(
        thread["thread_id"], "chat", input=human("How many moons? I am unsure.")
    )
    request = asked["__interrupt__"][0]["value"]
    assert request["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    trace_id = asked["last_run"]["trace_id"]
    async with httpx.AsyncClient(
        trust_env=False
    ) as h:  # counted like any run, on the replica that ran it
        metrics = "".join([(await h.get(f"{r.url}/metrics")).text for r in (a, b)])
    assert 'parallax_runs_total{graph="chat",status="interrupted"} 1.0' in metrics
    assert (await client(b).threads.get_state(thread["thread_id"]))["next"] == ["review_answer"]
    edit = {
        "decisions": [
            {"type": "edit", "edited_action": {"name": "answer", "args": {"answer": "95"}}}
        ]
    }
    done = await client(b).runs.wait(thread["thread_id"], "chat", command={"resume": edit})
    assert done["messages"][-1]["content"] == "95" and len(done["messages"]) == 2
    trace = cluster.cli(
        "trace", trace_id, "--tenant", "acme"
    )  # the CLI on the deployment's database
    assert (trace["target"], trace["correct"]) == ("95", False)
    assert trace["feedback"][-1]["score"] == 0.0 and trace["feedback"][-1]["by"] == "chat review"
    stats = cluster.cli("stats", "--tenant", "acme")
    assert stats["overall"]["accuracy_runs"] >= 1


async def test_mcp_over_streamable_http_runs_on_the_server_as_the_keys_tenant(cluster):
    a, b = cluster.replicas[:2]
    async with httpx.AsyncClient(trust_env=False) as h:
        refused = await h.post(
            f"{a.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": "Bearer nope"},
        )
        assert refused.status_code == 401 and "API key" in refused.json()["message"]
    async with mcp_client(a, KEYS["acme"]) as mcp:
        assert sorted(t.name for t in (await mcp.list_tools()).tools) == [
            "feedback",
            "plan",
            "solve",
        ]
        voted = await mcp.call_tool("solve", {"task": "What is 2 + 2?", "mode": "vote", "votes": 3})
        typed = await mcp.call_tool(
            "solve", {"task": "Invoice: total 41.50", "mode": "direct", "output_schema": SCHEMA}
        )
        planned = await mcp.call_tool(
            "plan", {"task": "Compute 2 + 2, then write a one-line note about it."}
        )
        scored = await mcp.call_tool(
            "feedback", {"trace_id": voted.structured_content["trace_id"], "score": "up"}
        )
        unknown = await mcp.call_tool("feedback", {"trace_id": "nope", "score": 1})
    run = voted.structured_content
    assert (run["status"], run["answer"], run["vote_counts"], run["confidence"]) == (
        "ok",
        "4",
        {"4": 3},
        1.0,
    )
    assert typed.structured_content["data"] == {"total": 1}
    assert planned.structured_content["mode"] == "plan", planned.structured_content
    assert planned.structured_content["status"] in (
        "ok",
        "needs_review",
    ), planned.structured_content["reason"]
    assert scored.structured_content == {
        "trace_id": run["trace_id"],
        "score": 1.0,
        "feedback_entries": 1,
    }
    assert unknown.is_error and "no trace 'nope'" in unknown.content[0].text
    # a real run of the server: its thread and checkpoint are the tenant's, on every replica; its
    # trace too
    state = await client(b).threads.get_state(run["thread_id"])
    assert state["values"]["trace_id"] == run["trace_id"]
    async with httpx.AsyncClient(trust_env=False) as h:
        other = await h.get(
            f"{b.url}/threads/{run['thread_id']}", headers={"x-api-key": KEYS["beta"]}
        )
        assert other.status_code == 404
    assert cluster.cli("trace", run["trace_id"], "--tenant", "acme")["feedback"][-1]["by"] == "mcp"
    assert (
        cluster.cli("trace", planned.structured_content["trace_id"], "--tenant", "acme")["tenant"]
        == "acme"
    )
    async with mcp_client(b, KEYS["beta"]) as mcp:  # beta cannot score acme's run
        foreign = await mcp.call_tool("feedback", {"trace_id": run["trace_id"], "score": 0})
    assert foreign.is_error and "no trace" in foreign.content[0].text


async def test_an_mcp_vote_on_an_object_asks_in_waves_until_its_required_fields_settle(cluster):
    a, b = cluster.replicas[:2]
    ask = {
        "task": "What are ACME's revenue and currency?",
        "mode": "vote",
        "votes": 8,
        "output_schema": FILING,
    }
    with scripted_votes(
        cluster.model,
        lambda i: {
            "revenue": 4796,
            "currency": "USD",
            "segments": [["Print"], [], ["Media"]][i % 3],
        },
    ) as requests:
        async with mcp_client(a, KEYS["acme"]) as mcp:
            agreed = (await mcp.call_tool("solve", ask)).structured_content
        first_wave = requests()
    currencies = ["USD", "EUR", "USD", "USD", "USD", "USD", "USD", "USD"]
    with scripted_votes(
        cluster.model, lambda i: {"revenue": 4796, "currency": currencies[i % 8]}
    ) as requests:
        async with mcp_client(b, KEYS["acme"]) as mcp:
            split = (await mcp.call_tool("solve", ask)).structured_content
        two_waves = requests()
    # the required fields agree: the first wave of at most 8 settles it; the optional list split
    # three ways is left out
    assert (agreed["status"], agreed["data"], agreed["confidence"]) == (
        "ok",
        {"revenue": 4796, "currency": "USD"},
        1.0,
    )
    assert first_wave == 3 and "segments" in agreed["reason"], agreed
    # currency 2-1 after the first wave: three more votes make 5-1, which settles it
    assert (split["status"], split["data"], split["confidence"]) == (
        "ok",
        {"revenue": 4796, "currency": "USD"},
        0.833,
    )
    assert two_waves == 6, split


async def test_an_mcp_call_over_the_tenants_limit_is_refused_with_when_to_retry(cluster):
    a, _ = cluster.replicas[:2]
    busy = client(a, "busy")
    cluster.set_model(latency_ms=1500)
    try:
        running = await fill_pending(busy, MAX_PENDING)
        async with mcp_client(a, KEYS["busy"]) as mcp:
            refused = await mcp.call_tool("solve", {"task": "What is 1 + 1?", "mode": "direct"})
        for thread_id, run_id in running:
            await busy.runs.join(thread_id, run_id)
    finally:
        cluster.set_model(latency_ms=20)
    assert refused.is_error and "retry after 1 s" in refused.content[0].text


def test_the_readmes_streamable_http_example_runs(cluster):
    block = python_block('streamable_http_client("http://127.0.0.1:2026/mcp"').replace(
        "http://127.0.0.1:2026", cluster.replicas[0].url
    )
    first, said = run_block(block).strip().splitlines()
    assert first.startswith("ok {'total': 1} ") and len(first.rsplit(" ", 1)[1]) == 32
    assert said == "reason: none"


async def test_a_runs_timeline_is_drawn_on_either_replica_for_its_tenant_only(cluster):
    a, b = cluster.replicas[:2]
    thread = await client(a).threads.create()
    out = await client(a).runs.wait(
        thread["thread_id"], "solve", input={"task": "What is 2 + 2?", "mode": "vote", "votes": 3}
    )
    async with httpx.AsyncClient(base_url=b.url, timeout=30) as http:
        svg = await http.get(f"/timeline/{out['trace_id']}", headers={"x-api-key": KEYS["acme"]})
        data = await http.get(
            f"/timeline/{out['trace_id']}",
            params={"format": "json"},
            headers={"Authorization": f"Bearer {KEYS['acme']}"},
        )
        other = await http.get(f"/timeline/{out['trace_id']}", headers={"x-api-key": KEYS["beta"]})
        anonymous = await http.get(f"/timeline/{out['trace_id']}")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml"), (
        svg.text
    )
    assert all(branch["id"] in svg.text for branch in out["branches"])
    assert sorted(lane["id"] for lane in data.json()["lanes"]) == sorted(
        branch["id"] for branch in out["branches"]
    )
    assert other.status_code == 404 and anonymous.status_code == 401


@pytest.mark.parametrize("turns", [TWO_TURNS, FIVE_TURNS], ids=["two-turns", "five-turns"])
async def test_chat_follow_ups_are_answered_from_the_conversation_on_either_replica(cluster, turns):
    """The model answers a sum only when its numbers are in the prompt
    (testkit/conversation_model.py); turns alternate between the replicas, so the conversation is
    read from the shared database, not a process.
    """
    thread = await client(cluster.replicas[0]).threads.create()
    outs = []
    with conversing(cluster.model):
        for n, (said, _) in enumerate(turns):
            outs.append(
                await client(cluster.replicas[n % 2]).runs.wait(
                    thread["thread_id"], "chat", input=human(said)
                )
            )
    assert [o["messages"][-1]["content"] for o in outs] == [want for _, want in turns]
    last = outs[-1]["last_run"]
    stored = (await client(cluster.replicas[0]).store.search_items(["traces"], limit=100))["items"]
    (trace,) = [i["value"] for i in stored if i["key"] == last["trace_id"]]
    assert trace["task_preview"] == last["task"] and trace["follow_up"]["asked"] == turns[-1][0]
    assert [b["kind"] for b in trace["branches"]].count("condense") == 1
