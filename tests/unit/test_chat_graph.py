"""The chat graph with a scripted model: turns become solve runs, a needs_review answer becomes a
review."""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from parallax.graphs.chat import builder
from parallax.logic.review_request import BadDecision, decision_of
from parallax.logic.run_stats import run_stats
from parallax.runtime.storage.trace_store import TraceStore
from testkit.scripted_model import asked_for, scripted

TEMPS = [0.3, 0.475, 0.65, 0.825, 1.0]
SPLIT = dict(zip(TEMPS, ["42", "42", "42", "41", "41"], strict=True))


def answer(text: str) -> str:
    return json.dumps({"reasoning": "because", "answer": text})


def script(prompt: str, t: float, i: int) -> str:
    """Direct answers say 4; votes split 3:2 (short of min_votes 4) and the judge picks nothing; a
    follow-up stands alone already (condensed unchanged)."""
    if asked_for() == "CondensedTask":
        return json.dumps({"task": prompt.split("Last message: ")[-1]})
    if "Candidate answers" in prompt:
        return json.dumps({"choice": "none of them", "reason": "?"})
    return answer(SPLIT.get(round(t, 3), "4"))


def chat_graph():
    store = InMemoryStore()
    return builder.compile(checkpointer=InMemorySaver(), store=store), store


def config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


UNSURE = {
    "messages": [{"role": "user", "content": "What is 6 * 7?"}],
    "mode": "vote",
    "votes": 5,
    "min_votes": 4,
}


async def test_two_turns_on_one_thread_are_two_runs_with_replies_carrying_status_and_trace():
    graph, store = chat_graph()
    ctx, _ = scripted(script)
    first = await graph.ainvoke(
        {"messages": [{"role": "user", "content": "What is 2 + 2?"}], "mode": "direct"},
        config("t1"),
        context=ctx,
    )
    second = await graph.ainvoke(
        {
            "messages": [{"role": "user", "content": [{"type": "text", "text": "And 3 + 1?"}]}],
            "mode": "direct",
        },
        config("t1"),
        context=ctx,
    )
    assert [m.type for m in second["messages"]] == ["human", "ai", "human", "ai"]
    replies = [m for m in second["messages"] if m.type == "ai"]
    assert [m.content for m in replies] == ["4", "4"]
    meta = [m.response_metadata["parallax"] for m in replies]
    assert [x["status"] for x in meta] == ["ok", "ok"]
    assert meta[0]["trace_id"] == first["last_run"]["trace_id"] != meta[1]["trace_id"]
    traces = await TraceStore(store).traces()
    assert {t["trace_id"] for t in traces} == {x["trace_id"] for x in meta}
    assert {t["task_preview"] for t in traces} == {
        "What is 2 + 2?",
        "And 3 + 1?",
    }  # each turn's own task
    assert "__interrupt__" not in second


async def test_needs_review_interrupts_in_agent_chat_ui_hitl_shape():
    graph, _ = chat_graph()
    ctx, _ = scripted(script)
    out = await graph.ainvoke(UNSURE, config("t2"), context=ctx)
    request = out["__interrupt__"][0].value
    assert request["review_configs"] == [
        {"action_name": "answer", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
    (action,) = request["action_requests"]
    assert action["name"] == "answer" and action["args"] == {"answer": out["last_run"]["answer"]}
    assert "not sure" in action["description"]
    assert out["messages"][-1].response_metadata["parallax"]["status"] == "needs_review"


async def test_an_edit_replaces_the_reply_and_becomes_the_runs_target_and_feedback():
    graph, store = chat_graph()
    ctx, _ = scripted(script)
    asked = await graph.ainvoke(UNSURE, config("t3"), context=ctx)
    trace_id, unsure = asked["last_run"]["trace_id"], asked["last_run"]["answer"]
    edit = {
        "decisions": [
            {"type": "edit", "edited_action": {"name": "answer", "args": {"answer": "43"}}}
        ]
    }
    done = await graph.ainvoke(Command(resume=edit), config("t3"), context=ctx)
    assert [m.type for m in done["messages"]] == [
        "human",
        "ai",
    ]  # the reply was replaced, not added to
    reply = done["messages"][-1]
    assert reply.content == "43"
    assert {"review": "edited", "original_answer": unsure}.items() <= reply.response_metadata[
        "parallax"
    ].items()
    trace = await TraceStore(store).get_trace(trace_id)
    assert (trace["target"], trace["correct"]) == ("43", False)
    assert trace["feedback"][-1]["score"] == 0.0 and "43" in trace["feedback"][-1]["comment"]
    stats = run_stats([trace])
    assert (stats["overall"]["accuracy_runs"], stats["overall"]["accuracy"]) == (1, 0.0)


async def test_accept_keeps_the_answer_and_reject_says_so():
    graph, store = chat_graph()
    ctx, _ = scripted(script)
    asked = await graph.ainvoke(UNSURE, config("t4"), context=ctx)
    kept = await graph.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}]}), config("t4"), context=ctx
    )
    assert kept["messages"][-1].content == asked["last_run"]["answer"]
    assert kept["messages"][-1].response_metadata["parallax"]["review"] == "accepted"
    assert (await TraceStore(store).get_trace(asked["last_run"]["trace_id"]))["feedback"][-1][
        "score"
    ] == 1.0

    asked = await graph.ainvoke(UNSURE, config("t5"), context=ctx)
    gone = await graph.ainvoke(
        Command(resume={"decisions": [{"type": "reject", "message": "too unsure"}]}),
        config("t5"),
        context=ctx,
    )
    assert (
        gone["messages"][-1].content.startswith("Rejected in review")
        and "too unsure" in gone["messages"][-1].content
    )
    assert len(gone["messages"]) == 3  # the unsure answer stays, the rejection follows it
    trace = await TraceStore(store).get_trace(asked["last_run"]["trace_id"])
    assert trace["feedback"][-1]["score"] == 0.0 and "target" not in trace


def test_decisions_are_read_from_every_client_shape_and_nonsense_is_refused():
    assert decision_of({"decisions": [{"type": "approve"}]}) == {"kind": "accept"}
    assert decision_of([{"type": "accept", "args": None}]) == {
        "kind": "accept"
    }  # Agent Inbox / Studio
    assert decision_of(
        [{"type": "edit", "args": {"action": "answer", "args": {"answer": " 7 "}}}]
    ) == {"kind": "edit", "answer": "7"}
    assert decision_of({"answer": "7"}) == {"kind": "edit", "answer": "7"}
    assert decision_of("reject") == {"kind": "reject"}
    assert decision_of([{"type": "response", "args": "wrong"}]) == {
        "kind": "reject",
        "message": "wrong",
    }
    with pytest.raises(BadDecision, match="approve, edit or reject"):
        decision_of({"decisions": [{"type": "maybe"}]})
    with pytest.raises(BadDecision, match="must carry the new answer"):
        decision_of(
            {"decisions": [{"type": "edit", "edited_action": {"name": "answer", "args": {}}}]}
        )


async def test_with_an_output_schema_the_reply_is_the_settled_object_as_json():
    graph, _ = chat_graph()
    ctx, _ = scripted(
        lambda prompt, t, i: json.dumps({"reasoning": "read it", "data": {"total": 41.5}})
    )
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    out = await graph.ainvoke(
        {
            "messages": [{"role": "user", "content": "Invoice 7: total due 41.50 EUR."}],
            "mode": "direct",
            "output_schema": schema,
        },
        config("t6"),
        context=ctx,
    )
    assert out["last_run"]["data"] == {"total": 41.5} and out["last_run"]["status"] == "ok"
    assert json.loads(out["messages"][-1].content) == {"total": 41.5}


async def test_a_failed_run_replies_with_why_and_asks_no_review():
    graph, _ = chat_graph()
    ctx, _ = scripted(lambda prompt, t, i: ValueError("the endpoint is down"), max_attempts=1)
    out = await graph.ainvoke(
        {"messages": [{"role": "user", "content": "What is 2 + 2?"}], "mode": "direct"},
        config("t7"),
        context=ctx,
    )
    assert out["messages"][-1].content.startswith("The run failed: ") and "__interrupt__" not in out
    assert out["messages"][-1].response_metadata["parallax"]["status"] == "failed"
