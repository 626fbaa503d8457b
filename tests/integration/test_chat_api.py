"""The `chat` graph served by a real `langgraph dev`, driven with langgraph-sdk as Agent Chat UI
drives it.

The model is the fault server with a scripted reply (testkit/review_model.py): sure
answers, and a split vote for tasks that say "unsure", so a review is met every time. For
conversations, the reply that answers a sum only when its numbers are in the prompt
(testkit/conversation_model.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langgraph_sdk import get_client

from testkit.conversation_model import FIVE_TURNS, TWO_TURNS, conversing
from testkit.langgraph_dev import LANGGRAPH, DevServer, scripted_dev_server
from testkit.readme_examples import python_block, run_block
from testkit.review_model import review_reply

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory) -> Iterator[DevServer]:
    if not LANGGRAPH.is_file():
        pytest.skip(f"langgraph CLI not found at {LANGGRAPH}")
    with scripted_dev_server(tmp_path_factory.mktemp("chat-dev"), review_reply) as server:
        yield server


def human(text: str) -> dict:
    return {"messages": [{"type": "human", "content": text}]}


async def test_chat_is_listed_and_two_turns_on_one_thread_keep_the_conversation(chat_server):
    client = get_client(url=chat_server.url)
    assert "chat" in {a["graph_id"] for a in await client.assistants.search(limit=50)}
    thread = await client.threads.create()
    first = await client.runs.wait(thread["thread_id"], "chat", input=human("What is 2 + 2?"))
    second = await client.runs.wait(thread["thread_id"], "chat", input=human("And what is 3 + 1?"))
    assert [m["type"] for m in second["messages"]] == ["human", "ai", "human", "ai"]
    replies = [m for m in second["messages"] if m["type"] == "ai"]
    assert [m["content"] for m in replies] == ["4", "4"]
    meta = [m["response_metadata"]["parallax"] for m in replies]
    assert [x["status"] for x in meta] == ["ok", "ok"]
    assert meta[0]["trace_id"] == first["last_run"]["trace_id"] != meta[1]["trace_id"]
    # the UI lists a graph's threads by metadata.graph_id
    listed = await client.threads.search(metadata={"graph_id": "chat"}, limit=100)
    assert thread["thread_id"] in {t["thread_id"] for t in listed}


async def test_a_review_resumed_with_an_edit_lands_on_the_runs_trace(chat_server):
    client = get_client(url=chat_server.url)
    thread = await client.threads.create()
    asked = await client.runs.wait(
        thread["thread_id"], "chat", input=human("How many moons? I am unsure.")
    )
    (interrupt,) = asked["__interrupt__"]
    request = interrupt["value"]
    assert request["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    unsure, trace_id = (
        request["action_requests"][0]["args"]["answer"],
        asked["last_run"]["trace_id"],
    )
    assert asked["last_run"]["status"] == "needs_review" and unsure in {"42", "41", "40", ""}
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["review_answer"]

    edit = {
        "decisions": [
            {"type": "edit", "edited_action": {"name": "answer", "args": {"answer": "95"}}}
        ]
    }
    done = await client.runs.wait(thread["thread_id"], "chat", command={"resume": edit})
    assert [m["type"] for m in done["messages"]] == ["human", "ai"]
    assert done["messages"][-1]["content"] == "95"
    assert done["messages"][-1]["response_metadata"]["parallax"]["review"] == "edited"
    # the person's answer is the run's target and feedback, where `parallax stats` and the exports
    # read them
    item = await client.store.get_item(["traces", "default"], trace_id)
    trace = item["value"]
    assert (trace["target"], trace["correct"]) == ("95", False)
    assert trace["feedback"][-1]["score"] == 0.0 and "95" in trace["feedback"][-1]["comment"]


def test_the_readmes_chat_example_runs_both_ways(chat_server):
    """As written (a sure answer, no review), and with a task the model is unsure of (the review is
    edited)."""
    block = python_block('"chat", input=said').replace("http://127.0.0.1:2024", chat_server.url)
    sure = run_block(block).splitlines()
    assert sure[0].startswith("4 {") and "'status': 'ok'" in sure[0] and len(sure) == 1
    unsure = run_block(
        block.replace("What is 12 * 12?", "What is 12 * 12? I am unsure.")
    ).splitlines()
    assert "'status': 'needs_review'" in unsure[0] and unsure[-1] == "after review: 144"


async def test_streamed_as_agent_chat_ui_streams_it_the_ui_sees_the_reply_not_the_branches_json(
    chat_server,
):
    """Agent Chat UI streams "messages-tuple": the branches' model calls neither stream (the run
    would change how it calls the endpoint) nor show up as messages; the reply does."""
    client = get_client(url=chat_server.url)
    thread = await client.threads.create()
    parts = [
        p
        async for p in client.runs.stream(
            thread["thread_id"],
            "chat",
            input=human("What is 2 + 2?"),
            stream_mode=["values", "messages-tuple"],
        )
    ]
    shown = [p.data[0] for p in parts if p.event == "messages"]
    assert shown and all(m["type"] == "ai" for m in shown)
    assert {m["content"] for m in shown} == {"4"}, shown  # no '{"reasoning": ...}' of a branch
    final = [p.data for p in parts if p.event == "values"][-1]
    assert final["last_run"]["status"] == "ok" and final["messages"][-1]["content"] == "4"


async def converse(client, turns) -> list[dict]:
    """Each turn sent on one thread as Agent Chat UI sends it (the new human message only); the
    final states."""
    thread = await client.threads.create()
    return [
        await client.runs.wait(thread["thread_id"], "chat", input=human(said)) for said, _ in turns
    ]


@pytest.mark.parametrize("turns", [TWO_TURNS, FIVE_TURNS], ids=["two-turns", "five-turns"])
async def test_follow_ups_that_cannot_be_answered_alone_are_answered_from_the_conversation(
    chat_server, turns
):
    """The model answers a sum only when its numbers are in the prompt
    (testkit/conversation_model.py)."""
    client = get_client(url=chat_server.url)
    with conversing(chat_server.model):
        outs = await converse(client, turns)
    assert [o["messages"][-1]["content"] for o in outs] == [want for _, want in turns]
    assert [o["last_run"]["status"] for o in outs] == ["ok"] * len(turns)
    for out, (said, _) in zip(outs[1:], turns[1:], strict=True):
        item = await client.store.get_item(["traces", "default"], out["last_run"]["trace_id"])
        trace = item["value"]
        assert (
            trace["task_preview"] == out["last_run"]["task"] != said
        )  # the task as the branches saw it
        assert trace["follow_up"]["asked"] == said
        assert [b["status"] for b in trace["branches"] if b["kind"] == "condense"] == ["ok"]


async def test_a_streamed_follow_up_shows_the_reply_not_the_condense_calls_json(chat_server):
    client = get_client(url=chat_server.url)
    thread = await client.threads.create()
    with conversing(chat_server.model):
        await client.runs.wait(thread["thread_id"], "chat", input=human(TWO_TURNS[0][0]))
        parts = [
            p
            async for p in client.runs.stream(
                thread["thread_id"],
                "chat",
                input=human(TWO_TURNS[1][0]),
                stream_mode=["values", "messages-tuple"],
            )
        ]
    shown = [p.data[0] for p in parts if p.event == "messages"]
    assert {m["content"] for m in shown} == {"72"}, shown  # no '{"task": ...}' of the condense call


def test_the_readmes_follow_up_example_runs(chat_server):
    block = python_block("follow_ups()").replace("http://127.0.0.1:2024", chat_server.url)
    with conversing(chat_server.model):
        lines = run_block(block).splitlines()
    assert lines == [
        "What is 12 × 12? -> What is 12 × 12? -> 144",
        "And half of that? -> What is half of 144? -> 72",
    ]
