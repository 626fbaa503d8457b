"""A chat is a conversation: follow-ups that cannot be answered alone are condensed into tasks that
can.

The model is scripted (testkit/conversation_model.py): it answers a sum only when the sum's numbers
are in its prompt, and rewrites a follow-up from the earlier turns when asked to condense one.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from parallax.graphs.chat import builder
from parallax.logic.conversation import (
    TURN_CHARS,
    WINDOW_CHARS,
    WINDOW_TURNS,
    earlier_exchanges,
    transcript_task,
)
from parallax.logic.run_stats import model_calls
from parallax.runtime.storage.trace_store import TraceStore
from testkit.conversation_model import FIVE_TURNS, TWO_TURNS, UNKNOWN, answer_of, reply_for
from testkit.scripted_model import asked_for, scripted


def script(prompt: str, t: float, i: int) -> str:
    return reply_for(prompt, asked_for())


def chat_graph():
    store = InMemoryStore()
    return builder.compile(checkpointer=InMemorySaver(), store=store), store


async def converse(turns, script_fn=script, thread="t", mode="vote"):
    graph, store = chat_graph()
    ctx, calls = scripted(script_fn)
    out = None
    for said, _ in turns:
        out = await graph.ainvoke(
            {"messages": [{"role": "user", "content": said}], "mode": mode, "votes": 3},
            {"configurable": {"thread_id": thread}},
            context=ctx,
        )
    return out, store, calls


def test_the_scripted_model_cannot_answer_a_follow_up_alone():
    assert answer_of("What is 12 × 12?") == "144"
    assert answer_of("And half of that?") == UNKNOWN  # what a chat that forgets would get


async def test_two_turns_every_follow_up_answered_from_the_conversation():
    out, store, calls = await converse(TWO_TURNS)
    replies = [m.content for m in out["messages"] if m.type == "ai"]
    assert replies == [want for _, want in TWO_TURNS]
    assert out["last_run"]["task"] == "What is half of 144?"  # the task as the branches saw it
    condense_calls = [p for p, _ in calls if "Last message:" in p]
    assert len(condense_calls) == 1  # none on the first turn, one on the follow-up
    assert "Task: What is 12 × 12?\nAnswer: 144" in condense_calls[0]


async def test_five_turns_each_follow_up_condensed_once_and_traced_as_the_branches_saw_it():
    out, store, calls = await converse(FIVE_TURNS)
    ai = [m for m in out["messages"] if m.type == "ai"]
    assert [m.content for m in ai] == [want for _, want in FIVE_TURNS]
    tasks = [m.response_metadata["parallax"]["task"] for m in ai]
    assert tasks == [
        "What is 12 × 12?",
        "What is half of 144?",
        "What is 72 plus 8?",
        "What is 80 times 2?",
        "What is 160 minus 144?",
    ]
    assert sum("Last message:" in p for p, _ in calls) == 4
    traces = {t["trace_id"]: t for t in await TraceStore(store).traces()}
    by_turn = [traces[m.response_metadata["parallax"]["trace_id"]] for m in ai]
    assert [t["task_preview"] for t in by_turn] == tasks
    assert "follow_up" not in by_turn[0] and model_calls(by_turn[0]) == 3  # the votes alone
    for (said, _), trace, n in zip(FIVE_TURNS[1:], by_turn[1:], range(1, 5), strict=True):
        assert trace["follow_up"] == {"asked": said, "earlier_turns": n}
        (condense,) = [b for b in trace["branches"] if b["kind"] == "condense"]
        assert condense["status"] == "ok" and condense["parent_id"] == trace["trace_id"]
        assert (
            condense["output"] == {"task": trace["task_preview"]}
            and condense["tokens"]["total"] > 0
        )
        assert model_calls(trace) == 4  # the condense call is counted with the run's three votes


async def test_a_failed_condense_call_sends_the_bounded_conversation_with_the_follow_up():
    def failing(prompt: str, t: float, i: int):
        return (
            "no JSON here" if asked_for() == "CondensedTask" else script(prompt, t, i)
        )  # re-asked, then failed

    out, store, _ = await converse(TWO_TURNS, failing)
    task = out["last_run"]["task"]
    assert task == transcript_task([("What is 12 × 12?", "144")], "And half of that?")
    (trace,) = [
        t for t in await TraceStore(store).traces() if t["trace_id"] == out["last_run"]["trace_id"]
    ]
    assert [b["status"] for b in trace["branches"] if b["kind"] == "condense"] == ["failed"]
    assert trace["task_preview"] == task[:200]


def test_the_conversation_shown_to_the_condense_call_is_bounded():
    long = "x" * (TURN_CHARS * 3)
    messages = []
    for n in range(40):
        messages += [HumanMessage(f"question {n} {long}"), AIMessage(f"answer {n}")]
    kept = earlier_exchanges(messages)
    assert len(kept) <= WINDOW_TURNS and sum(len(t) + len(a) for t, a in kept) <= WINDOW_CHARS
    assert kept[-1][1] == "answer 39" and all(len(t) <= TURN_CHARS for t, _ in kept)
    # a reply's run task stands in for its human message (a condensed follow-up is self-contained)
    ran = AIMessage("72", response_metadata={"parallax": {"task": "What is half of 144?"}})
    assert earlier_exchanges([HumanMessage("And half of that?"), ran]) == [
        ("What is half of 144?", "72")
    ]
    # an edit in review replaced the reply; a rejection follows the unsure answer: the last reply is
    # the answer
    assert earlier_exchanges(
        [HumanMessage("q"), AIMessage("41"), AIMessage("Rejected in review")]
    ) == [("q", "Rejected in review")]


async def test_a_long_conversation_does_not_grow_the_condense_prompt_without_limit():
    turns = [("What is 12 × 12?", "144")] + [("And half of that?", "")] * 12
    _, _, calls = await converse(turns)
    sizes = [len(p) for p, _ in calls if "Last message:" in p]
    assert len(sizes) == 12 and max(sizes) == max(
        sizes[WINDOW_TURNS:]
    )  # flat once the window is full
    assert max(sizes) < WINDOW_CHARS + 2000
