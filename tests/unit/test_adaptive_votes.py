"""Adaptive votes, one answer per meaning, and an `ok` that is a promise: end to end against the
scripted OpenAI-compatible server (testkit/fault_server.py), through ChatOpenAI and the product's
settings.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from parallax.graphs.solve import builder
from parallax.logic.branch_kinds import spread
from parallax.logic.vote import final_value
from parallax.state.context import Context
from testkit.fault_server import FaultConfig, chat_log


def vote(answer: str) -> str:
    return json.dumps({"reasoning": "worked it out", "answer": answer})


def by_index(answers: list[str], judge: str | None = None, votes: int = 8):
    """The reply of vote i (known by its temperature in the spread of `votes`), or the judge's
    choice."""
    temperatures = spread(0.3, 1.0, votes)

    def reply(body: dict) -> str:
        text = json.dumps(body["messages"])
        if "Candidate answers" in text:
            return json.dumps({"choice": judge, "reason": "scripted"})
        index = min(range(votes), key=lambda i: abs(temperatures[i] - body.get("temperature", 0.3)))
        return vote(answers[index % len(answers)])

    return reply


async def test_spellings_of_one_number_are_one_answer_and_a_settled_first_wave_asks_no_more(
    scripted_endpoint,
):
    url = scripted_endpoint(
        FaultConfig(reply=by_index(["144", "12 * 12 = 144", "The answer is 144.", "144.0"]))
    )
    out = await builder.compile().ainvoke({"task": "What is 12 * 12?", "mode": "vote", "votes": 8})
    assert (out["status"], out["answer"], out["vote_counts"]) == ("ok", "144", {"144": 3})
    assert out["votes_asked"] == 3 and out["stop_reason"].startswith(
        "settled: P(leader ahead) 0.938"
    )
    assert len(chat_log(url)) == 3  # 3 of at most 8: the other 5 were never asked


async def test_a_split_first_wave_asks_a_second_wave_and_stops_when_settled(scripted_endpoint):
    url = scripted_endpoint(
        FaultConfig(reply=by_index(["42", "41", "42", "42", "42", "42", "7", "7"]))
    )
    out = await builder.compile().ainvoke({"task": "What is 6 * 7?", "mode": "vote", "votes": 8})
    # wave 1: 42 42 41 (2-1, P = 0.69); wave 2: three more 42s make 5-1 (P = 0.9375): settled at 6
    # votes
    assert (out["status"], out["vote_counts"], out["votes_asked"]) == ("ok", {"42": 5, "41": 1}, 6)
    assert len(chat_log(url)) == 6 and out["confidence"] == 0.833


async def test_a_judge_choosing_a_one_vote_minority_ends_needs_review(
    scripted_endpoint, monkeypatch
):
    monkeypatch.setenv("PARALLAX_EARLY_STOP", "false")
    scripted_endpoint(
        FaultConfig(reply=by_index(["42", "41", "42", "41", "40"], judge="40", votes=5))
    )
    out = await builder.compile().ainvoke({"task": "What is 6 * 7?", "mode": "vote", "votes": 5})
    assert (
        out["vote_counts"] == {"42": 2, "41": 2, "40": 1}
        and out["stop_reason"] == "all of them: early stopping off"
    )
    assert out["status"] == "needs_review" and final_value(out["answer"]) in ("42", "41")
    assert "the judge chose '40', which 1 vote(s) gave against 2" in out["reason"]


async def test_votes_in_flight_when_the_vote_settles_are_cancelled_not_counted_and_not_asked_again(
    scripted_endpoint,
):
    # a seed whose first 4 requests have exactly one that hangs: the first wave asks 4 at once, 3
    # agree at once
    seed = next(
        s
        for s in range(1000)
        if [FaultConfig(rate_hang=0.25, seed=s).fault_for(i) for i in range(4)].count("hang") == 1
    )
    url = scripted_endpoint(
        FaultConfig(reply=by_index(["42"]), rate_hang=0.25, seed=seed, hang_s=60)
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "cancel"}}
    ctx = Context(vote_first_wave=4, straggler_factor=0.0)
    out = await asyncio.wait_for(
        graph.ainvoke({"task": "What is 6 * 7?", "mode": "vote", "votes": 8}, config, context=ctx),
        30,
    )  # far less than the hang: it was not waited for
    records = [b for b in out["branches"] if b["kind"] == "vote"]
    cancelled = [b for b in records if b["status"] == "cancelled"]
    assert len(records) == 4 and len(cancelled) == 1 and cancelled[0]["state"] == "CANCELLED"
    assert (out["status"], out["vote_counts"], out["votes_asked"]) == ("ok", {"42": 3}, 3)
    assert (
        cancelled[0]["id"] not in out["failed_branches"]
        and "settled in flight" in cancelled[0]["transitions"][-1]["reason"]
    )
    asked = len(chat_log(url))
    again = await graph.ainvoke(
        None, config, context=ctx
    )  # resuming a finished run asks nobody again
    assert again["vote_counts"] == {"42": 3} and len(chat_log(url)) == asked == 4


async def test_a_run_killed_mid_wave_resumes_without_asking_finished_votes_again(scripted_endpoint):
    url = scripted_endpoint(
        FaultConfig(
            reply=by_index(["42", "41", "40", "42", "42", "42", "42", "42"]), latency_ms=300
        )
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "killed"}}
    run = asyncio.create_task(
        graph.ainvoke(
            {"task": "What is 6 * 7?", "mode": "vote", "votes": 8}, config, durability="sync"
        )
    )
    async with (
        httpx.AsyncClient() as client
    ):  # wait until the second wave is in flight, then kill the run
        while (
            len(
                [
                    e
                    for e in (await client.get(f"{url[:-3]}/_log")).json()
                    if e["path"].endswith("/chat/completions")
                ]
            )
            < 7
        ):
            await asyncio.sleep(0.02)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    first_wave = [e for e in chat_log(url)][:3]
    assert all(e["status"] == 200 for e in first_wave)
    out = await graph.ainvoke(None, config)
    requests = chat_log(url)
    # wave 1 (3 votes, finished) was not asked again; wave 2 (4 votes, cut off) was asked once more
    assert len(requests) == 3 + 4 + 4
    assert (
        out["votes_asked"] == 7
        and out["vote_counts"] == {"42": 5, "41": 1, "40": 1}
        and out["status"] == "ok"
    )


async def test_a_vote_cut_at_the_token_cap_reports_the_tokens_it_spent(
    scripted_endpoint, monkeypatch
):
    monkeypatch.setenv("PARALLAX_EARLY_STOP", "false")
    scripted_endpoint(FaultConfig(reply=by_index(["42"]), rate_truncated=1.0))
    out = await builder.compile().ainvoke({"task": "What is 6 * 7?", "mode": "vote", "votes": 2})
    votes = [b for b in out["branches"] if b["kind"] == "vote"]
    assert out["status"] == "failed" and all("token limit" in b["error"] for b in votes)
    assert all(
        b["tokens"]["completion"] > 0 and b["tokens"]["total"] > b["tokens"]["completion"]
        for b in votes
    )


def test_the_vote_schema_bounds_what_a_grammar_lets_a_model_write():
    from parallax.state.payloads import VOTE_ANSWER_CHARS, VoteAnswer

    schema = VoteAnswer.model_json_schema()["properties"]
    assert (
        schema["answer"]["maxLength"] == VOTE_ANSWER_CHARS
        and schema["reasoning"]["maxLength"] == 280
    )
    assert (
        VoteAnswer(reasoning="r" * 1000, answer="the answer is 42").answer == "the answer is 42"
    )  # read, not re-asked


def test_the_cli_asks_in_waves_by_default_and_all_votes_with_no_early_stop(tmp_path):
    from typer.testing import CliRunner

    from parallax.cli import app
    from testkit.scripted_model import scripted

    runner = CliRunner()
    ctx, calls = scripted(
        lambda p, t, i: vote("42"), early_stop=None
    )  # None: the command's flag or the setting
    out = json.loads(
        runner.invoke(
            app, ["run", "What is 6 * 7?", "--mode", "vote", "--votes", "8", "--json"], obj=ctx
        ).stdout
    )
    assert (out["votes_asked"], len(calls)) == (3, 3) and out["stop_reason"].startswith("settled")
    out = json.loads(
        runner.invoke(
            app,
            [
                "run",
                "What is 6 * 7?",
                "--mode",
                "vote",
                "--votes",
                "8",
                "--no-early-stop",
                "--json",
            ],
            obj=ctx,
        ).stdout
    )
    assert (out["votes_asked"], len(calls)) == (8, 3 + 8) and out["vote_counts"] == {"42": 8}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"input": f"What is {n} * 7?", "target": "42"}) + "\n" for n in (6, 6))
    )
    result = runner.invoke(
        app,
        ["eval", str(tasks), "--mode", "vote", "--votes", "4", "--no-early-stop", "--json"],
        obj=ctx,
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["accuracy"] == 1.0 and len(calls) == 11 + 2 * 4
    assert runner.invoke(app, ["eval", str(tasks), "--votes", "0"], obj=ctx).exit_code == 2
