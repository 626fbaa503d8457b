"""Votes of one wave in one request with `n`, against a server that bills as OpenAI does
(testkit/billing_server.py).

Each choice is its own vote branch with its own record; an endpoint that refuses `n` or gives fewer
choices is asked separately, and remembered; a bad choice is re-asked on its own; votes at different
temperatures keep their own requests; a seat cancelled while it waits leaves the request to the
others.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import AIMessage

from parallax.graphs.solve import graph
from parallax.logic.branch_plans import request_groups
from parallax.runtime.services import process_services
from parallax.runtime.wave_request import Seat, WaveRequest, share_usage
from parallax.state.context import Context
from testkit.billing_server import Pricing

ONE_TEMPERATURE = {
    "vote_temperature_min": 0.7,
    "vote_temperature_max": 0.7,
    "straggler_factor": 0.0,
}
PAGE = " ".join(f"word{i}" for i in range(300))


def vote(votes: int = 3, early_stop: bool = False, **context) -> dict:
    run = {"task": f"{PAGE}\n\nHow many apples are in the basket?", "mode": "vote", "votes": votes}
    return graph.invoke(
        run, context=Context(early_stop=early_stop, **{**ONE_TEMPERATURE, **context})
    )


def votes_of(out: dict) -> list[dict]:
    return [b for b in out["branches"] if b["kind"] == "vote"]


def test_a_wave_of_votes_is_one_request_and_each_choice_its_own_branch(billing):
    server = billing()
    out = vote(3)
    assert out["status"] == "ok" and out["vote_counts"] == {"42": 3}
    assert [(e["n"], e["choices"]) for e in server.log()] == [(3, 3)]  # one request, three choices
    branches = votes_of(out)
    assert len({b["id"] for b in branches}) == 3 and all(
        b["status"] == "ok" and b["attempts"] == 1 for b in branches
    )
    bill = server.bill()
    # the prompt was billed once; its tokens are split over the three votes and sum to the bill
    assert sum(b["tokens"]["prompt"] for b in branches) == bill.prompt_tokens
    assert sum(b["tokens"]["completion"] for b in branches) == bill.completion_tokens
    assert (
        max(b["tokens"]["prompt"] for b in branches) - min(b["tokens"]["prompt"] for b in branches)
        <= 1
    )


def test_adaptive_waves_ask_one_request_each_and_a_later_wave_reads_the_cache(billing):
    answers = ["42", "42", "41", "41", "42", "41", "42", "42"]
    server = billing(lambda body, k: json.dumps({"reasoning": "r", "answer": answers[k]}))
    out = vote(8, early_stop=True)
    log = server.log()
    assert (
        log[0]["n"] == 3 and len(log) >= 2 and sum(e["n"] for e in log) == out["votes_asked"]
    )  # a request a wave
    assert log[0]["cached_tokens"] == 0 and all(
        e["cached_tokens"] > 300 for e in log[1:]
    )  # later waves: cached
    branches = votes_of(out)
    assert sum(b["tokens"]["cached_tokens"] for b in branches) == server.bill().cached_tokens > 0


def test_choices_that_came_back_together_are_all_counted_none_cancelled_in_flight(billing):
    # 2-1, then 4-1-1; the third wave asks the 2 votes left, and its first choice alone would settle
    # the vote (5-1)
    answers = ["42", "41", "42", "42", "42", "40", "42", "42"]
    server = billing(lambda body, k: json.dumps({"reasoning": "r", "answer": answers[k]}))
    out = vote(8, early_stop=True, vote_plan="waves")  # today's waves: 3, then at least 3
    assert [e["n"] for e in server.log()] == [3, 3, 2]
    branches = votes_of(out)
    assert [b["status"] for b in branches] == ["ok"] * 8 and out["vote_counts"] == {
        "42": 6,
        "41": 1,
        "40": 1,
    }
    assert (
        sum(b["tokens"]["prompt"] for b in branches) == server.bill().prompt_tokens
    )  # every choice is recorded


def test_an_endpoint_that_refuses_n_is_asked_separately_and_remembered(billing):
    server = billing(pricing=Pricing(base_ms=5, decode_ms_per_token=0.1, n_support="refuse"))
    out = vote(3)
    assert out["status"] == "ok" and out["vote_counts"] == {"42": 3}
    assert server.bill().refused == 1 and [e["n"] for e in server.log()] == [1, 1, 1]
    assert all(
        b["attempts"] == 1 for b in votes_of(out)
    )  # the refused request is not a failed attempt
    assert list(process_services().takes_n.values()) == [False]
    vote(3)  # the same process does not ask with n again
    assert server.bill().refused == 1 and len(server.log()) == 6


def test_an_endpoint_that_ignores_n_has_its_one_choice_used_and_the_rest_asked_alone(billing):
    server = billing(pricing=Pricing(base_ms=5, decode_ms_per_token=0.1, n_support="ignore"))
    out = vote(3)
    assert out["vote_counts"] == {"42": 3}
    assert [(e["n"], e["choices"]) for e in server.log()] == [(3, 1), (1, 1), (1, 1)]
    assert list(process_services().takes_n.values()) == [False]


def test_a_bad_choice_is_re_asked_on_its_own(billing):
    server = billing(
        lambda body, k: "not json" if k == 1 else json.dumps({"reasoning": "r", "answer": "42"})
    )
    out = vote(3)
    assert out["vote_counts"] == {"42": 3}
    assert [e["n"] for e in server.log()] == [3, 1]  # the wave, then one re-ask
    assert sorted(b["reasks"] for b in votes_of(out)) == [0, 0, 1]


def test_a_choice_cut_at_the_token_limit_fails_only_its_own_vote(billing):
    # the cut choice makes the whole parsed response fail (openai's parse): each vote then asks on
    # its own
    def reply(body: dict, k: int):
        if k == 1:
            return {"content": '{"reasoning": "r", "ans', "finish_reason": "length"}
        return json.dumps({"reasoning": "r", "answer": "42"})

    server = billing(reply)
    out = vote(3)
    assert [e["n"] for e in server.log()] == [3, 1, 1, 1]
    assert out["vote_counts"] == {"42": 3} and all(b["status"] == "ok" for b in votes_of(out))
    assert (
        False not in process_services().takes_n.values()
    )  # nothing to do with n: it is still asked with n


def test_by_default_a_wave_of_votes_is_one_request_at_one_temperature(billing, monkeypatch):
    monkeypatch.delenv("PARALLAX_VOTE_TEMPERATURE_MIN", raising=False)
    monkeypatch.delenv("PARALLAX_VOTE_TEMPERATURE_MAX", raising=False)
    server = billing()
    run = {"task": f"{PAGE}\n\nHow many apples are in the basket?", "mode": "vote", "votes": 5}
    out = graph.invoke(
        run, context=Context(straggler_factor=0.0)
    )  # no temperature set: the defaults
    assert out["status"] == "ok" and out["votes_asked"] == 3  # the first wave of 3 agreed
    assert [(e["n"], e["temperature"]) for e in server.log()] == [
        (3, 0.7)
    ]  # one request, the prompt billed once
    assert server.bill().prompt_tokens == server.log()[0]["prompt_tokens"]


def test_an_endpoint_that_reports_only_the_first_choices_usage_still_has_every_choice_recorded(
    billing, monkeypatch
):
    """llama.cpp's server, the embedded default, answers `n` choices with the first one's completion
    tokens only: the run records (and its `max_tokens` holds against) what all of them cost, not a
    third."""
    monkeypatch.delenv("PARALLAX_VOTE_TEMPERATURE_MIN", raising=False)
    monkeypatch.delenv("PARALLAX_VOTE_TEMPERATURE_MAX", raising=False)
    server = billing(
        lambda body, k: json.dumps(
            {"reasoning": " ".join(["counted"] * (4 + 8 * k)), "answer": "42"}
        ),
        Pricing(base_ms=5, decode_ms_per_token=0.1, usage_of="first_choice"),
    )
    out = graph.invoke(
        {"task": "How many apples are in the basket?", "mode": "vote", "votes": 5},
        context=Context(straggler_factor=0.0),
    )
    assert [e["n"] for e in server.log()] == [3]
    recorded = [b["tokens"]["completion"] for b in out["branches"] if b["kind"] == "vote"]
    truth = server.bill().completion_tokens  # the server's own count of all three choices' words
    assert len(recorded) == 3 and abs(sum(recorded) - truth) <= 0.1 * truth, (recorded, truth)
    assert len(set(recorded)) == 3  # each its own length, not an even share


def test_votes_at_different_temperatures_keep_their_own_requests(billing):
    server = billing()
    out = vote(3, vote_temperature_min=0.3, vote_temperature_max=1.0)
    assert out["vote_counts"] == {"42": 3}
    assert sorted(e["temperature"] for e in server.log()) == [0.3, 0.65, 1.0]
    assert all(e["n"] == 1 for e in server.log())


async def test_a_run_killed_while_its_second_wave_is_out_resumes_asking_only_that_wave_again(
    billing,
):
    from langgraph.checkpoint.memory import InMemorySaver

    from parallax.graphs.solve import builder

    answers = ["42", "41", "40", "42", "42", "42", "42", "42", "42", "42", "42"]
    server = billing(
        lambda body, k: json.dumps({"reasoning": "r", "answer": answers[k]}),
        Pricing(base_ms=5, decode_ms_per_token=0.1),
    )
    run_graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "killed-n"}}
    ctx = Context(**ONE_TEMPERATURE)
    task = {"task": "How many apples are in the basket?", "mode": "vote", "votes": 8}
    run = asyncio.create_task(run_graph.ainvoke(task, config, context=ctx, durability="sync"))
    while (
        not server.log()
    ):  # the first wave has come back: slow the endpoint down, then kill the run mid-wave
        await asyncio.sleep(0.01)
    server.state.pricing.base_ms = 2000
    while server.arrivals() < 2:
        await asyncio.sleep(0.01)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    server.state.pricing.base_ms = 5
    out = await run_graph.ainvoke(None, config, context=ctx)
    # wave 1 (one request, 3 votes, finished) was not asked again; wave 2 (one request, cut off) was
    # asked once more. The server logs a request when its reply is written: the cut-off one's lands
    # 2 s after it came, before or after this line runs, so arrivals count the requests and the log
    # says what each asked.
    asked = [e["n"] for e in server.log()]
    assert server.arrivals() == 3 and asked[0] == 3 and set(asked[1:]) == {out["votes_asked"] - 3}
    assert out["status"] == "ok" and out["vote_counts"]["42"] >= 3


def test_votes_that_can_share_a_request_travel_in_one_task():
    def spec(i: int, temperature: float, model: str = "") -> dict:
        return {"id": f"vote-{i}", "kind": "vote", "model": model, "temperature": temperature}

    same = [spec(i, 0.7) for i in range(5)]
    assert [len(t) for t in request_groups(same)] == [5]  # type: ignore[arg-type]
    spread = [spec(i, 0.3 + i / 10) for i in range(5)]
    assert [len(t) for t in request_groups(spread)] == [1] * 5  # type: ignore[arg-type]
    two_models = [spec(i, 0.7, "ab"[i % 2]) for i in range(6)]
    assert [[s["model"] for s in t] for t in request_groups(two_models)] == [["a"] * 3, ["b"] * 3]  # type: ignore[arg-type]
    assert [len(t) for t in request_groups([spec(i, 0.7) for i in range(40)])] == [16, 16, 8]  # type: ignore[arg-type]


def test_the_usage_is_split_so_the_branches_sum_to_the_bill():
    usage = {
        "input_tokens": 100,
        "output_tokens": 31,
        "total_tokens": 131,
        "input_token_details": {"cache_read": 64},
    }
    replies = [AIMessage(content=c, usage_metadata=dict(usage)) for c in ("a" * 10, "b" * 20, "")]  # type: ignore[arg-type]
    share_usage(replies)
    shares = [r.usage_metadata for r in replies]
    assert [s["input_tokens"] for s in shares] == [34, 33, 33]  # type: ignore[index]
    assert sum(s["output_tokens"] for s in shares) == 31 and shares[2]["output_tokens"] == 0  # type: ignore[index]
    assert sum(s["input_token_details"]["cache_read"] for s in shares) == 64  # type: ignore[index]


def test_a_seat_cancelled_while_waiting_leaves_the_request_to_the_others():
    async def scenario() -> None:
        release = asyncio.Event()
        sent: list[int] = []

        async def send(n: int, owners: list[str]) -> tuple[list[AIMessage], int]:
            sent.append(n)
            await release.wait()
            return [
                AIMessage(
                    content=str(i),
                    usage_metadata={"input_tokens": 9, "output_tokens": 1, "total_tokens": 10},
                )
                for i in range(n)
            ], n

        wave = WaveRequest(["v0", "v1", "v2"], {})
        key = ("http://x/v1", "m")
        seats = [asyncio.create_task(Seat(wave, f"v{i}").take(key, send)) for i in range(3)]
        await asyncio.sleep(0.01)
        seats[1].cancel()
        await asyncio.sleep(0.01)
        release.set()
        got = await asyncio.gather(*seats, return_exceptions=True)
        assert sent == [3] and isinstance(got[1], asyncio.CancelledError)
        assert [str(m.content) for m in got if isinstance(m, AIMessage)] == ["0", "1"]
        # a second copy of a branch (a straggler's backup) asks on its own
        assert await Seat(wave, "v0").take(key, send) is None

        lonely = WaveRequest(["w0", "w1"], {})
        cancelled = asyncio.Event()

        async def hang(n: int, owners: list[str]) -> tuple[list[AIMessage], int]:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return [], n

        both = [asyncio.create_task(Seat(lonely, f"w{i}").take(key, hang)) for i in range(2)]
        await asyncio.sleep(0.01)
        for task in both:
            task.cancel()
        await asyncio.gather(*both, return_exceptions=True)
        await asyncio.wait_for(
            cancelled.wait(), 1
        )  # nobody waits any more: the request is cancelled

    asyncio.run(scenario())


def test_parallax_trace_shows_the_tokens_a_run_read_from_the_endpoints_cache(billing):
    from typer.testing import CliRunner

    from parallax.cli import app

    server = billing()
    runner = CliRunner()
    ask = ["run", f"{PAGE}\n\nHow many apples are in the basket?", "--mode", "direct", "--json"]
    first, second = (json.loads(runner.invoke(app, ask).stdout) for _ in range(2))
    cached = [e["cached_tokens"] for e in server.log()]
    assert cached[0] == 0 and cached[1] > 300  # the second run sent the same prompt
    shown = runner.invoke(app, ["trace", second["trace_id"], "--json"]).stdout
    assert json.loads(shown)["tokens"]["cached_tokens"] == cached[1]
    table = runner.invoke(app, ["trace", second["trace_id"]]).stdout
    assert f"{cached[1]} of them cached" in " ".join(table.split())
    assert (
        json.loads(runner.invoke(app, ["trace", first["trace_id"], "--json"]).stdout)["tokens"][
            "cached_tokens"
        ]
        == 0
    )
