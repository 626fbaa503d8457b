"""Branch lifecycles and straggler backups, through the real solve graph with a scripted model."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest
from tenacity import wait_none

from parallax.graphs.solve import graph
from parallax.logic.stragglers import StragglerWatch
from parallax.runtime.run_context import resolved
from parallax.state.context import Context
from parallax.state.lifecycle import BranchState, IllegalTransition, Lifecycle, Transition
from testkit.scripted_model import scripted
from tests.unit.test_solve_graph import _error


def answer(text: str) -> str:
    return json.dumps({"reasoning": "r", "answer": text})


def votes_of(out: dict) -> list[dict]:
    return [b for b in out["branches"] if b["kind"] == "vote"]


def paths(out: dict) -> list[list[str]]:
    return [[t["state"] for t in b["transitions"]] for b in votes_of(out)]


def replayed(transitions: list[Transition]) -> BranchState | None:
    """The state a recorded path ends in, each step made again through `Lifecycle.move`, which
    raises `IllegalTransition` on an edge the lifecycle does not have."""
    life = Lifecycle()
    for t in transitions:
        life.move(t["state"], t.get("reason", ""))
    return life.state


def test_the_lifecycle_refuses_an_edge_it_does_not_have():
    life = Lifecycle()
    life.move("PENDING")
    with pytest.raises(IllegalTransition):
        life.move("COMPLETED")
    life.move("DISPATCHED")
    life.finish("ESCALATED", "circuit open")
    assert [t["state"] for t in life.transitions] == [
        "PENDING",
        "DISPATCHED",
        "FAILED",
        "ESCALATED",
    ]
    assert replayed(life.transitions) == "ESCALATED"
    with pytest.raises(IllegalTransition):
        replayed([{"state": "PENDING"}, {"state": "IN_PROGRESS"}, {"state": "COMPLETED"}])


async def test_a_clean_branch_goes_pending_dispatched_in_progress_completed(monkeypatch):
    model_ctx, _ = scripted(lambda p, t, i: answer("9"))
    out = await graph.ainvoke(
        {"task": "What is 4 + 5?", "mode": "vote", "votes": 3}, context=model_ctx
    )
    assert paths(out) == [["PENDING", "DISPATCHED", "IN_PROGRESS", "COMPLETED"]] * 3
    for b in votes_of(out):
        times = [t["at"] for t in b["transitions"]]
        assert times == sorted(times) and b["state"] == "COMPLETED"


async def test_retries_and_reasks_are_transitions_with_reasons(monkeypatch):
    seen: dict[float, int] = {}

    def script(prompt, t, i):
        seen[t] = seen.get(t, 0) + 1
        if t == 0.3 and seen[t] == 1:
            return _error(429, retry_after="0")
        if t == 1.0 and seen[t] == 1:
            return "not json at all"
        return answer("9")

    model_ctx, _ = scripted(script)
    out = await graph.ainvoke(
        {"task": "What is 4 + 5?", "mode": "vote", "votes": 3}, context=model_ctx
    )
    by_temperature = {b["temperature"]: b for b in votes_of(out)}
    rate_limited = by_temperature[0.3]["transitions"]
    assert [t["state"] for t in rate_limited] == [
        "PENDING",
        "DISPATCHED",
        "IN_PROGRESS",
        "FAILED",
        "RETRY",
        "IN_PROGRESS",
        "COMPLETED",
    ]
    assert (
        "RateLimitError" in rate_limited[3]["reason"]
        and rate_limited[4]["reason"] == "backoff 0.00s"
    )
    reasked = by_temperature[1.0]["transitions"]
    assert [t["state"] for t in reasked][3:] == ["FAILED", "RETRY", "IN_PROGRESS", "COMPLETED"]
    assert reasked[3]["reason"].startswith("invalid reply")
    assert [replayed(b["transitions"]) for b in out["branches"]] == ["COMPLETED"] * len(
        out["branches"]
    )


async def test_a_branch_out_of_retries_is_escalated(monkeypatch):
    model_ctx, _ = scripted(lambda p, t, i: _error(500) if t == 1.0 else answer("9"))
    monkeypatch.setenv("PARALLAX_MAX_ATTEMPTS", "2")
    monkeypatch.setattr("parallax.runtime.retry.WAIT", wait_none())
    out = await graph.ainvoke(
        {"task": "What is 4 + 5?", "mode": "vote", "votes": 3}, context=model_ctx
    )
    failed = [b for b in votes_of(out) if b["status"] != "ok"]
    assert len(failed) == 1 and failed[0]["state"] == "ESCALATED"
    assert [t["state"] for t in failed[0]["transitions"]] == [
        "PENDING",
        "DISPATCHED",
        "IN_PROGRESS",
        "FAILED",
        "RETRY",
        "IN_PROGRESS",
        "FAILED",
        "ESCALATED",
    ]
    assert "gave up after 2 attempts" in failed[0]["transitions"][-1]["reason"]
    assert (
        failed[0]["input"]["text"] == "What is 4 + 5?" and failed[0]["input"]["temperature"] == 1.0
    )
    assert out["vote_counts"] == {"9": 2}


# --- stragglers ------------------------------------------------------------------------


def slow_first_call_at(temperature: float, delay: float, fast: float = 0.02):
    """Every call answers '9' after `fast` s, except the first call at `temperature`, which takes
    `delay` s."""
    seen: dict[float, int] = {}

    def script(prompt, t, i):
        seen[t] = seen.get(t, 0) + 1
        return (delay if t == temperature and seen[t] == 1 else fast, answer("9"))

    return script


async def test_a_straggler_gets_a_backup_copy_that_wins_and_the_vote_counts_once(monkeypatch):
    model_ctx, calls = scripted(slow_first_call_at(1.0, delay=5.0))
    ctx = replace(model_ctx, straggler_factor=3.0, straggler_min_s=0.2)
    out = await asyncio.wait_for(
        graph.ainvoke({"task": "What is 4 + 5?", "mode": "vote", "votes": 5}, context=ctx), 4.0
    )
    assert out["vote_counts"] == {"9": 5} and out["status"] == "ok"
    assert len(calls) == 6  # five branches plus one backup copy
    raced = [b for b in votes_of(out) if b.get("backup")]
    assert len(raced) == 1 and raced[0]["temperature"] == 1.0
    race = raced[0]["backup"]
    assert race["winner"] == "backup" and "finished siblings" in race["reason"]
    assert race["other_transitions"][-1] == {**race["other_transitions"][-1], "state": "CANCELLED"}
    assert raced[0]["state"] == "COMPLETED" and replayed(raced[0]["transitions"]) == "COMPLETED"
    assert replayed(race["other_transitions"]) == "CANCELLED"
    assert len({b["id"] for b in votes_of(out)}) == 5


async def test_without_stragglers_on_the_slow_branch_is_waited_for(monkeypatch):
    model_ctx, calls = scripted(slow_first_call_at(1.0, delay=0.6))
    out = await graph.ainvoke(
        {"task": "What is 4 + 5?", "mode": "vote", "votes": 5},
        context=replace(model_ctx, straggler_factor=0.0),
    )
    assert len(calls) == 5 and not any(b.get("backup") for b in votes_of(out))
    assert out["vote_counts"] == {"9": 5}


async def test_the_original_wins_when_it_finishes_first(monkeypatch):
    """The original is slow enough to trigger a backup, but the backup is slower still."""
    seen: dict[float, int] = {}

    def script(prompt, t, i):
        seen[t] = seen.get(t, 0) + 1
        if t == 1.0:
            return (0.5, answer("9")) if seen[t] == 1 else (5.0, answer("wrong"))
        return (0.02, answer("9"))

    model_ctx, calls = scripted(script)
    out = await asyncio.wait_for(
        graph.ainvoke(
            {"task": "What is 4 + 5?", "mode": "vote", "votes": 5},
            context=replace(model_ctx, straggler_factor=3.0, straggler_min_s=0.2),
        ),
        4.0,
    )
    raced = [b for b in votes_of(out) if b.get("backup")]
    assert len(raced) == 1 and raced[0]["backup"]["winner"] == "original"
    assert raced[0]["vote"] == "9" and out["vote_counts"] == {
        "9": 5
    }  # the cancelled copy's "wrong" never counts
    assert len(calls) == 6


async def test_a_failing_original_lets_the_backup_finish(monkeypatch):
    seen: dict[float, int] = {}

    def script(prompt, t, i):
        seen[t] = seen.get(t, 0) + 1
        if t == 1.0 and seen[t] == 1:
            return (0.35, _error(400))  # the original fails for good after the backup started
        return (0.02 if t != 1.0 else 0.5, answer("9"))

    model_ctx, _ = scripted(script)
    out = await graph.ainvoke(
        {"task": "What is 4 + 5?", "mode": "vote", "votes": 5},
        context=replace(model_ctx, straggler_factor=3.0, straggler_min_s=0.2),
    )
    raced = [b for b in votes_of(out) if b.get("backup")]
    assert (
        len(raced) == 1 and raced[0]["status"] == "ok" and raced[0]["backup"]["winner"] == "backup"
    )
    assert raced[0]["backup"]["other_transitions"][-1]["state"] == "ESCALATED"
    assert out["vote_counts"] == {"9": 5} and out["failed_branches"] == []


def test_the_threshold_needs_finished_siblings_and_respects_the_floor():
    watch = StragglerWatch(factor=3.0, min_s=1.0)
    assert watch.threshold() is None
    watch.finished(0.1)
    assert watch.threshold() is None
    watch.finished(0.3)
    assert watch.threshold() == 1.0  # 3 x 0.2 is under the floor
    watch.finished(2.0)
    assert watch.threshold() == 1.0  # median 0.3: still under the floor
    watch.finished(2.0)
    watch.finished(2.0)
    assert watch.threshold() == pytest.approx(6.0)
    assert StragglerWatch(factor=0.0, min_s=0.0).threshold() is None


@pytest.mark.parametrize(
    "env, factor",
    [
        ({}, 3.0),  # the embedded llama.cpp server decodes requests side by side
        (
            {"PARALLAX_MODEL_PARALLEL": "1"},
            0.0,
        ),  # ... unless it has one slot: a copy would only queue
        ({"OPENAI_BASE_URL": "http://h/v1"}, 3.0),
        (
            {"OPENAI_BASE_URL": "http://h/v1", "PARALLAX_RESPONSE_FORMAT": "json_object_schema"},
            0.0,
        ),  # llama-cpp-python
        ({"OPENAI_BASE_URL": "http://h/v1", "PARALLAX_STRAGGLER_FACTOR": "5"}, 5.0),
    ],
)
def test_backups_default_off_where_a_copy_could_only_queue(monkeypatch, env, factor):
    for name in (
        "OPENAI_BASE_URL",
        "PARALLAX_RESPONSE_FORMAT",
        "PARALLAX_STRAGGLER_FACTOR",
        "PARALLAX_MODEL_PARALLEL",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert resolved(Context()).straggler_factor == factor


async def test_a_lone_branch_is_measured_against_recent_branches_of_its_model(monkeypatch):
    """A direct run has no siblings: once the process has seen enough branches, a slow one still
    gets a backup."""
    from parallax.logic.stragglers import MIN_RECENT

    slow = {"next": False}
    model_ctx, calls = scripted(
        lambda p, t, i: (5.0 if slow.pop("next", False) else 0.02, answer("9"))
    )
    ctx = replace(model_ctx, straggler_factor=3.0, straggler_min_s=0.2)
    cold = await graph.ainvoke({"task": "Explain tides.", "mode": "direct"}, context=ctx)
    assert not any(
        b.get("backup") for b in cold["branches"]
    )  # no history yet, no siblings: nothing to compare with
    for _ in range(MIN_RECENT):
        await graph.ainvoke({"task": "Explain tides.", "mode": "direct"}, context=ctx)
    slow["next"] = True
    before = len(calls)
    out = await asyncio.wait_for(
        graph.ainvoke({"task": "Explain tides.", "mode": "direct"}, context=ctx), 4.0
    )
    direct = [b for b in out["branches"] if b["kind"] == "direct"][0]
    assert (
        direct["backup"]["winner"] == "backup"
        and "recent branches of this model" in direct["backup"]["reason"]
    )
    assert len(calls) - before == 2 and out["status"] == "ok"
