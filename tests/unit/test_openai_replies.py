"""A run's state in OpenAI's shapes (server/openai_replies.py), read back with the openai SDK's own
types."""

from __future__ import annotations

import json

from openai.types.chat import ChatCompletion, ChatCompletionChunk

from parallax.server.openai_replies import ChunkWriter, completion, progress, usage


def branch(
    kind: str, n: int, prompt: int, done: int, vote: str | None = None, cost: float | None = 0.0
) -> dict:
    return {
        "id": f"{kind}-{n}",
        "kind": kind,
        "status": "ok",
        "tokens": {"prompt": prompt, "completion": done, "total": prompt + done},
        "vote": vote,
        "latency_ms": 1500,
        "model": "gpt-4o-mini",
        "cost_usd": cost,
    }


STATE = {
    "answer": "42",
    "status": "ok",
    "confidence": 1.0,
    "vote_counts": {"42": 2},
    "reason": "",
    "mode": "vote",
    "trace_id": "t1",
    "branches": [
        branch("vote", 1, 100, 7, "42", 0.001),
        branch("vote", 2, 90, 5, "42", 0.002),
        branch("safety", 1, 0, 0),
    ],
}


def test_usage_sums_every_branch():
    assert usage(STATE) == {
        "prompt_tokens": 190,
        "completion_tokens": 12,
        "total_tokens": 202,
        "parallax_cost_usd": 0.003,
    }
    assert usage({"branches": [{"tokens": None}, "junk"]}) == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "parallax_cost_usd": 0.0,
    }


def test_a_model_without_a_price_makes_the_cost_unknown_not_zero():
    unpriced = {
        **STATE,
        "branches": [
            *STATE["branches"],
            {**branch("judge", 1, 50, 3, cost=None), "model": "my-llama"},
        ],
    }
    assert usage(unpriced)["parallax_cost_usd"] is None
    said = completion(
        unpriced, model="parallax-vote", run_id="r", thread_id="t", created=1, typed=False
    )["parallax"]
    assert said["cost_usd"] is None and said["spend"]["unpriced"] == ["my-llama"]


def test_a_completion_parses_as_the_sdks_chat_completion_and_carries_the_run():
    reply = ChatCompletion.model_validate(
        completion(
            STATE, model="parallax-vote", run_id="r1", thread_id="th1", created=1, typed=False
        )
    )
    assert reply.choices[0].message.content == "42" and reply.choices[0].finish_reason == "stop"
    assert reply.usage.total_tokens == 202 and reply.id == "chatcmpl-r1"
    assert reply.usage.parallax_cost_usd == 0.003  # type: ignore[attr-defined]  # the SDK keeps extra fields
    assert reply.parallax == {
        "status": "ok",
        "confidence": 1.0,
        "vote_counts": {"42": 2},
        "reason": "",
        "mode": "vote",
        "trace_id": "t1",
        "thread_id": "th1",
        "run_id": "r1",
        "cost_usd": 0.003,
        "spend": {
            "tokens": 202,
            "prompt_tokens": 190,
            "cached_tokens": 0,
            "completion_tokens": 12,
            "cost_usd": 0.003,
            "unpriced": [],
        },
        "note": "",
    }


def test_a_typed_reply_is_the_objects_json_and_no_object_is_a_refusal():
    typed = {**STATE, "data": {"vendor": "ACME", "total": 3.5}, "answer": "ignored"}
    message = completion(typed, model="m", run_id="r", thread_id="t", created=1, typed=True)[
        "choices"
    ][0]["message"]
    assert (
        json.loads(message["content"]) == {"vendor": "ACME", "total": 3.5}
        and message["refusal"] is None
    )
    failed = {**STATE, "data": None, "status": "failed", "reason": "all branches failed"}
    message = completion(failed, model="m", run_id="r", thread_id="t", created=1, typed=True)[
        "choices"
    ][0]["message"]
    assert (
        message["content"] is None
        and message["refusal"] == "Parallax run failed: all branches failed"
    )


def test_stream_chunks_parse_as_the_sdks_chunks_with_usage_last():
    writer = ChunkWriter(
        model="parallax-vote", run_id="r1", thread_id="th1", created=1, include_usage=True
    )
    lines = [
        writer.start(),
        writer.delta(reasoning_content="vote branch vote-1: ok -> 42\n"),
        *writer.finish(STATE, False),
    ]
    chunks = [
        ChatCompletionChunk.model_validate(json.loads(line.removeprefix("data: ")))
        for line in lines
    ]
    assert (
        chunks[0].choices[0].delta.role == "assistant" and chunks[0].parallax["thread_id"] == "th1"
    )
    assert chunks[1].choices[0].delta.reasoning_content.startswith("vote branch")
    assert chunks[2].choices[0].delta.content == "42"
    assert chunks[3].choices[0].finish_reason == "stop" and chunks[3].parallax["status"] == "ok"
    assert chunks[4].choices == [] and chunks[4].usage.total_tokens == 202
    assert all(c.usage is None for c in chunks[:4])
    assert writer.done() == "data: [DONE]\n\n"


def test_progress_names_each_finished_branch_and_task():
    lines = progress({"work": {"branches": [branch("vote", 1, 1, 1, "42")]}})
    assert lines == ["vote branch vote-1: ok -> 42 (1.5 s)"]
    planned = progress(
        {"make_plan": {"plan": {"tasks": [{"id": 1, "goal": "add"}, {"id": 2, "goal": "note"}]}}}
    )
    assert planned == ["plan: 2 task(s): 1. add; 2. note"]
    assert progress({"run_task": {"tasks": [{"id": 2, "kind": "solve", "status": "DONE"}]}}) == [
        "task 2 (solve): DONE"
    ]
    assert progress({"merge": {"status": "needs_review", "reason": "no majority"}}) == [
        "merged: needs_review - no majority"
    ]
    assert progress(None) == [] and progress({"route": None}) == []
