"""`learn --from-traces` and the `loop` graph: signal precedence, runs consumed once (also by two
loops at once, two processes, and a round slower than its lease), tenants never cross, failed
reflections retried later and later (and given up only when the reply was unusable), candidates go
on canary, bad arguments refused."""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import pydoc
from datetime import UTC, datetime, timedelta

import httpx
import openai
import pytest
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from parallax.cli import app
from parallax.cli.learn import traces_line
from parallax.graphs.learn import builder as learn_builder
from parallax.graphs.loop import builder as loop_builder
from parallax.graphs.solve import builder as solve_builder
from parallax.logic.feedback import correct_answer, give_feedback
from parallax.logic.loop import rounds
from parallax.logic.releases import end_release
from parallax.logic.trace_signal import signal_of
from parallax.runtime.services import Services
from parallax.runtime.storage.consumed import MAX_FAILURES, RETRY_MAX_S, RETRY_S, retry_after_s
from parallax.runtime.storage.stores import consumed_in, open_sqlite_store, playbooks_in, traces_in
from testkit.scripted_model import asked_for, scripted
from testkit.word_counts import word_counts

runner = CliRunner()
LESSON = "Add the two numbers of the sum before answering; state the total."
bag_of_words = word_counts("add two numbers sum total answer what is plus state before".split())


def script(answer="7"):
    def reply(prompt, t, i):
        if "You review one solved task" in prompt:
            return json.dumps({"diagnosis": "did not add", "lessons": [LESSON], "item_tags": []})
        if "You turn lessons into playbook entries" in prompt:
            return json.dumps({"entries": [{"section": "sums", "text": LESSON, "about": ["sum"]}]})
        return json.dumps({"reasoning": "r", "answer": answer})

    return reply


def reflection_fails(with_reply):
    """script(), except that every reflection call gets `with_reply` (text, or an exception to
    raise)."""
    learn = script()

    def reply(prompt, t, i):
        return with_reply if asked_for() == "Reflection" else learn(prompt, t, i)

    return reply


def connection_refused():
    return openai.APIConnectionError(
        request=httpx.Request("POST", "http://model.test/v1/chat/completions")
    )


async def production_runs(store, ctx, n, tenant="default", start=0):
    """n runs served by the tenant's default playbook; their trace ids."""
    solve = solve_builder.compile(store=store)
    ids = []
    for i in range(start, start + n):
        out = await solve.ainvoke(
            {
                "task": f"Add the two numbers {i} and {i + 1}: state the sum total.",
                "mode": "direct",
                "tenant": tenant,
            },
            {"configurable": {"thread_id": f"thread-{tenant}-{i}"}},
            context=ctx,
        )
        ids.append(out["trace_id"])
    return ids


class Clock:
    """The time runtime/storage/consumed.py measures claims and retries by, stopped, moved on by
    `advance`."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch):
    stopped = Clock()
    monkeypatch.setattr("parallax.runtime.storage.consumed.now", stopped)
    return stopped


# --- the signal ------------------------------------------------------------------------


def test_signal_precedence_target_then_feedback_then_status():
    run = {"trace_id": "t", "answer": "7", "status": "ok", "branches": []}
    both = {**run, "target": "9", "correct": False, "feedback": [{"score": 1.0, "comment": ""}]}
    assert (
        signal_of(both)["source"] == "target" and signal_of(both)["correct"] is False
    )  # target beats feedback
    scored = {**run, "feedback": [{"score": 0.0, "comment": "wrong unit"}]}
    assert signal_of(scored) == {
        "source": "feedback",
        "correct": False,
        "feedback": "a person scored this answer 0 of 1: wrong unit",
    }  # feedback beats ok
    assert signal_of(run)["source"] == "status" and signal_of(run)["correct"] is True
    assert signal_of({**run, "status": "needs_review"})["correct"] is False
    parse = {
        **run,
        "status": "failed",
        "branches": [{"kind": "direct", "status": "failed", "cause": "parse"}],
    }
    assert signal_of(parse)["correct"] is False
    down = {
        **run,
        "status": "failed",
        "branches": [{"kind": "direct", "status": "failed", "cause": "connection"}],
    }
    assert signal_of(down) is None  # the endpoint's fault says nothing about the playbook
    assert signal_of({**run, "status": None}) is None


# --- learning from stored runs ----------------------------------------------------------------


async def test_learns_from_each_signal_skips_runs_without_one_and_never_twice():
    store = InMemoryStore()
    ctx, calls = scripted(script(), embedder=bag_of_words)
    ids = await production_runs(store, ctx, 4)
    await correct_answer(store, "default", ids[0], "1")  # 0 + 1: the run said 7, so wrong
    await give_feedback(store, "default", ids[1], "down", "not the sum")
    trace = await traces_in(store).get_trace(ids[3])  # an endpoint failure: no signal
    await traces_in(store).put_trace(
        {
            **trace,
            "status": "failed",
            "branches": [{"kind": "direct", "status": "failed", "cause": "timeout"}],
        }
    )
    learn = learn_builder.compile(store=store)
    out = await learn.ainvoke({"from_traces": True, "batch": 10}, context=ctx)
    assert out["traces"]["claimed"] == 3 and out["traces"]["no_signal"] == 1
    assert out["traces"]["by_signal"] == {"target": 1, "feedback": 1, "status": 1}
    assert out["traces"]["consumed"] == 3 and out["traces"]["replayed_in_gate"] == 1
    reflections = [p for p, _ in calls if "You review one solved task" in p]
    assert len(reflections) == 3
    assert any("expected 1, got '7'" in p for p in reflections)
    assert any("a person scored this answer 0 of 1: not the sum" in p for p in reflections)
    # the corrected run is replayed by the gate: 0/1 before and after is a tie without signal, so no
    # blind commit
    assert out["accepted"] is False and "a tie without signal" in out["batches"][0]["reason"]
    head = await playbooks_in(store).head("default")
    assert head.version == 0 and [
        i.text for c in await playbooks_in(store).candidates("default") for i in c.active
    ] == [LESSON]
    # a second learn run finds nothing new: no run teaches the playbook twice
    calls.clear()
    again = await learn.ainvoke({"from_traces": True}, context=ctx)
    assert (
        again["traces"]["claimed"] == 0
        and again["traces"]["taken_before"] == 3
        and again["to_version"] == head.version
    )
    assert not [p for p, _ in calls if "You review one solved task" in p]


async def test_two_loops_at_once_never_take_the_same_run():
    store = InMemoryStore()
    ctx, calls = scripted(script(), embedder=bag_of_words)
    await production_runs(store, ctx, 6)
    learn = learn_builder.compile(store=store)
    a, b = await asyncio.gather(
        *(
            learn.ainvoke({"from_traces": True, "limit": 4, "batch": 4}, context=ctx)
            for _ in range(2)
        )
    )
    assert a["traces"]["claimed"] + b["traces"]["claimed"] == 6
    records = await consumed_in(store, "default", "default").records()
    assert len(records) == 6 and {r["state"] for r in records.values()} == {"consumed"}
    assert {r["round"] for r in records.values()} == {a["learn_run_id"], b["learn_run_id"]}
    reflected = [p for p, _ in calls if "You review one solved task" in p]
    assert len(reflected) == 6  # each run reflected on once


def _claim_in_process(home, ids, queue):
    import os

    os.environ["PARALLAX_HOME"] = home

    async def main():
        async with open_sqlite_store() as store:
            return await consumed_in(store, "default", "default").claim(
                ids, f"round-{os.getpid()}", None, 600
            )

    queue.put(asyncio.run(main())[0])


def test_two_processes_claim_disjoint_runs(tmp_path):
    ids = [f"trace-{i}" for i in range(40)]
    queue = multiprocessing.get_context("spawn").Queue()
    procs = [
        multiprocessing.get_context("spawn").Process(
            target=_claim_in_process, args=(str(tmp_path), ids, queue)
        )
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    got = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(got[0] + got[1]) == sorted(ids)  # every run claimed once, by one of the two


def test_a_process_opening_the_store_waits_for_another_process_writing_to_it(tmp_path, monkeypatch):
    """Another process's write transaction on the CLI's SQLite file (a connection of its own here,
    which SQLite locks out the same way; held 6 s, longer than sqlite3's default 5 s busy timeout,
    as a loaded machine's learn batch can) makes opening the store wait, not fail with "database is
    locked"; CI saw two processes opening one file at once fail that way."""
    import sqlite3
    import threading

    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path))
    path = tmp_path / "store.sqlite"
    holding, done = threading.Event(), threading.Event()

    def other_process_writes():
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        holding.set()
        done.wait(6)
        conn.execute("COMMIT")
        conn.close()

    writer = threading.Thread(target=other_process_writes)
    writer.start()
    holding.wait(10)

    async def main():
        async with open_sqlite_store() as store:
            claim = await consumed_in(store, "default", "default").claim(
                ["trace-1"], "round-1", None, 600
            )
            return claim[0], (await (await store.conn.execute("PRAGMA journal_mode")).fetchone())[0]

    try:
        assert asyncio.run(main()) == (["trace-1"], "wal")
    finally:
        done.set()
        writer.join()


async def test_a_tenants_runs_only_teach_that_tenants_playbooks():
    store = InMemoryStore()
    ctx, _ = scripted(script(), embedder=bag_of_words)
    await production_runs(store, ctx, 3, tenant="acme")
    learn = learn_builder.compile(store=store)
    beta = await learn.ainvoke({"from_traces": True, "tenant": "beta"}, context=ctx)
    assert (
        beta["traces"]["considered"] == 0
        and (await playbooks_in(store, "beta").head("default")).version == 0
    )
    acme = await learn.ainvoke({"from_traces": True, "tenant": "acme"}, context=ctx)
    assert (
        acme["traces"]["claimed"] == 3
        and (await playbooks_in(store, "acme").head("default")).version == 1
    )
    assert await consumed_in(store, "beta", "default").records() == {}


async def test_a_killed_round_leaves_its_runs_to_the_next():
    store = InMemoryStore()
    ctx, _ = scripted(script(), embedder=bag_of_words)
    ids = await production_runs(store, ctx, 3)
    # a round claimed them and died before consuming them: its claim expires
    claimed, *_ = await consumed_in(store, "default", "default").claim(
        ids, "learn-dead", None, 0.05
    )
    assert len(claimed) == 3
    learn = learn_builder.compile(store=store)
    assert (await learn.ainvoke({"from_traces": True}, context=ctx))["traces"]["claimed"] == 0
    await asyncio.sleep(0.1)
    assert (await learn.ainvoke({"from_traces": True}, context=ctx))["traces"]["consumed"] == 3


class Killed(BaseException):
    """The process dying mid-round: nothing after it runs (a BaseException, so no node catches
    it)."""


def kill(monkeypatch, target):
    def die(*args, **kwargs):
        raise Killed(target)

    monkeypatch.setattr(target, die)


@pytest.mark.parametrize(
    "kind, with_target",
    [("memory", False), ("memory", True), ("sqlite", False)],
    ids=["accepted", "rejected", "accepted-sqlite"],
)
async def test_a_round_killed_after_its_commit_never_has_its_runs_learned_again(
    monkeypatch, kind, with_target
):
    async with (
        open_sqlite_store() if kind == "sqlite" else contextlib.nullcontext(InMemoryStore())
    ) as store:
        await killed_after_commit(monkeypatch, store, with_target)


async def killed_after_commit(monkeypatch, store, with_target):
    ctx, calls = scripted(script(), embedder=bag_of_words)
    ids = await production_runs(store, ctx, 3)
    if with_target:  # a replayed tie: the candidate is rejected, and kept under the batch's key
        await correct_answer(store, "default", ids[0], "1")
    learn = learn_builder.compile(store=store)
    with monkeypatch.context() as m:
        kill(
            m, "parallax.nodes.commit.consume_runs"
        )  # between the commit and marking the runs consumed
        with pytest.raises(Killed):
            await learn.ainvoke({"from_traces": True, "lease_s": 0.05}, context=ctx)
    playbooks = playbooks_in(store)
    versions, candidates = (
        (await playbooks.head("default")).version,
        len(await playbooks.candidates("default")),
    )
    assert (versions, candidates) == ((0, 1) if with_target else (1, 0))  # the commit was written
    await asyncio.sleep(0.1)  # the dead round's claims expire
    calls.clear()
    out = await learn.ainvoke({"from_traces": True}, context=ctx)
    assert (
        out["traces"]["claimed"],
        out["traces"]["taken_before"],
        out["traces"]["recovered"],
    ) == (0, 3, 3)
    assert (
        "3 taken before (learned from, given up, or claimed by another round; 3 of them learned by"
        " a round killed before it marked them, marked consumed now)" in traces_line(out["traces"])
    )
    assert not [p for p, _ in calls if "You review one solved task" in p]  # not reflected on again
    assert (await playbooks.head("default")).version == versions and len(
        await playbooks.candidates("default")
    ) == candidates
    records = (await consumed_in(store, "default", "default").records()).values()
    assert {(r["state"], r["outcome"]) for r in records} == {("consumed", "learned")}
    assert out["learn_run_id"] not in {
        r["round"] for r in records
    }  # learned by the dead round, not this one
    assert (await consumed_in(store, "default", "default").outcomes())["learned"] == 3


async def test_a_round_killed_before_its_commit_leaves_its_runs_to_the_next(monkeypatch):
    store = InMemoryStore()
    ctx, calls = scripted(script(), embedder=bag_of_words)
    await production_runs(store, ctx, 3)
    learn = learn_builder.compile(store=store)
    with monkeypatch.context() as m:
        # the claims already name the commit key: the round dies before the version is written
        kill(m, "parallax.runtime.storage.playbook_store.PlaybookStore.commit")
        with pytest.raises(Killed):
            await learn.ainvoke({"from_traces": True, "lease_s": 0.05}, context=ctx)
    records = (await consumed_in(store, "default", "default").records()).values()
    assert (
        len({r["commit_key"] for r in records}) == 1
        and (await playbooks_in(store).head("default")).version == 0
    )
    await asyncio.sleep(0.1)
    calls.clear()
    out = await learn.ainvoke({"from_traces": True}, context=ctx)
    assert (out["traces"]["claimed"], out["traces"]["recovered"], out["traces"]["consumed"]) == (
        3,
        0,
        3,
    )
    assert len([p for p, _ in calls if "You review one solved task" in p]) == 3
    assert out["to_version"] == 1 and [
        i.text for i in (await playbooks_in(store).head("default")).active
    ] == [LESSON]


@contextlib.asynccontextmanager
async def two_stores(kind):
    """What two rounds at once write through: one in-memory store, or two connections to the CLI's
    SQLite file (two `parallax loop once` processes)."""
    if kind == "memory":
        store = InMemoryStore()
        yield store, store
    else:
        async with open_sqlite_store() as one, open_sqlite_store() as other:
            yield one, other


def stall_first_call(monkeypatch, target, stalled, go):
    """The first call of the coroutine function `target` sets `stalled` and waits for `go`; later
    calls run at once."""
    owner_name, _, name = target.rpartition(".")
    owner = pydoc.locate(owner_name)
    original = getattr(owner, name)

    async def stall(*args, **kwargs):
        if not stalled.is_set():
            stalled.set()
            await go.wait()
        return await original(*args, **kwargs)

    monkeypatch.setattr(owner, name, stall)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize(
    "stall, why",
    [
        (
            "parallax.nodes.commit.mark_committing",
            "another round claimed 3 of this batch's runs",
        ),  # it finds them gone
        (
            "parallax.runtime.storage.playbook_store.PlaybookStore.commit",
            "and gave up its commit",
        ),  # its key is refused
    ],
    ids=["stalls-before-naming-its-key", "stalls-between-its-key-and-its-commit"],
)
async def test_a_round_slower_than_its_lease_never_has_its_runs_teach_the_playbook_twice(
    monkeypatch, kind, stall, why
):
    lease = 0.3
    ctx, calls = scripted(script(), embedder=bag_of_words)
    stalled, go = asyncio.Event(), asyncio.Event()
    async with two_stores(kind) as (store_a, store_b):
        await production_runs(store_a, ctx, 3)
        stall_first_call(monkeypatch, stall, stalled, go)
        given = {"share": 50, "lease_s": lease}
        slow = asyncio.create_task(loop_builder.compile(store=store_a).ainvoke(given, context=ctx))
        await (
            stalled.wait()
        )  # the slow round reflected on the runs and stalls on its way to its commit
        await asyncio.sleep(2 * lease)  # its claims (and its round slot) expire meanwhile
        fast = await loop_builder.compile(store=store_b).ainvoke(given, context=ctx)
        go.set()
        slow = await slow
        playbooks = playbooks_in(store_a)
        assert (
            await playbooks.head("default")
        ).version == 1  # one version: the slow round committed nothing
        assert [i.text for v in await playbooks.history("default") for i in v.active] == [LESSON]
        assert (fast["status"], fast["traces"]["claimed"], fast["traces"]["consumed"]) == (
            "learned",
            3,
            3,
        )
        assert (slow["status"], slow["traces"]["consumed"], slow["traces"]["dropped"]) == (
            "nothing",
            0,
            3,
        )
        assert why in slow["why"] and "nothing learned from the batch is committed" in slow["why"]
        records = (await consumed_in(store_a, "default", "default").records()).values()
        assert {(r["state"], r["outcome"], r["round"]) for r in records} == {
            ("consumed", "learned", fast["traces"]["round"])
        }
        assert (
            len([p for p, _ in calls if "You review one solved task" in p]) == 6
        )  # both reflected; one learned


async def test_a_version_written_by_a_writer_that_died_before_its_key_record_counts_as_committed():
    store = InMemoryStore()
    playbooks = playbooks_in(store)
    await playbooks.commit("default", 0, [], "learn-a", key="learn-a-b0")
    assert await playbooks.committed("default", "learn-a-b0") and not await playbooks.committed(
        "default", "learn-b-b0"
    )
    # a version record beyond the head, with its key, and neither the key's record nor the head
    # written
    ahead = (await playbooks.head("default")).model_dump(mode="json")
    await store.aput(
        ("playbooks", "default", "default"),
        "v000002",
        {**ahead, "version": 2, "parent": 1, "gate": {"commit_key": "learn-b-b0"}},
    )
    assert await playbooks.committed("default", "learn-b-b0")
    await playbooks.reject("default", 1, [], "learn-c", {}, "worse", key="learn-c-b0")
    assert await playbooks.committed("default", "learn-c-b0") and not await playbooks.committed(
        "default", "learn-d-b0"
    )


async def test_a_run_whose_reflection_never_validates_is_retried_then_given_up_with_the_reason(
    clock,
):
    store = InMemoryStore()
    ok, _ = scripted(script(), embedder=bag_of_words)
    ids = await production_runs(store, ok, 2)
    ctx, calls = scripted(
        reflection_fails("I cannot write JSON, sorry."), embedder=bag_of_words, services=Services()
    )
    learn = learn_builder.compile(store=store)
    consumed = consumed_in(store, "default", "default")
    for n in range(1, MAX_FAILURES + 1):
        out = await learn.ainvoke({"from_traces": True}, context=ctx)
        assert out["traces"]["claimed"] == 2 and out["traces"]["consumed"] == 0
        assert (out["traces"]["to_retry"], out["traces"]["unlearnable"]) == (
            (2, 0) if n < MAX_FAILURES else (0, 2)
        )
        assert {r["failures"] for r in (await consumed.records()).values()} == {n}
        clock.advance(retry_after_s(n))  # the wait after n failures in a row
    records = await consumed.records()
    assert set(records) == set(ids)
    for record in records.values():
        assert (record["state"], record["outcome"], record["last_failure"]["cause"]) == (
            "consumed",
            "unlearnable",
            "parse",
        )
        assert (
            "ParseFailure" in record["reason"]
            and record["reason"] == record["last_failure"]["error"]
        )
    calls.clear()
    again = await learn.ainvoke({"from_traces": True}, context=ctx)
    assert again["traces"]["claimed"] == 0 and again["traces"]["taken_before"] == 2
    assert not [p for p, _ in calls if "You review one solved task" in p]  # never asked again
    assert await consumed.outcomes() == {
        "learned": 0,
        "unlearnable": 2,
        "claimed": 0,
        "waiting": 0,
        "to_retry": 0,
        "next_try_at": None,
    }


async def test_a_broken_endpoint_burns_no_runs_backs_off_longer_each_time_and_learns_them_once_back(
    clock,
):
    store = InMemoryStore()
    ok, _ = scripted(script(), embedder=bag_of_words)
    ids = await production_runs(store, ok, 2)
    down, _ = scripted(
        reflection_fails(connection_refused()),
        embedder=bag_of_words,
        max_attempts=1,
        services=Services(),
    )
    learn = learn_builder.compile(store=store)
    consumed = consumed_in(store, "default", "default")
    tried = []
    for hour in range(9):  # a round every hour while the endpoint is down
        out = await learn.ainvoke({"from_traces": True}, context=down)
        if out["traces"]["claimed"]:
            assert (
                out["traces"]["claimed"],
                out["traces"]["to_retry"],
                out["traces"]["unlearnable"],
            ) == (2, 2, 0)
            tried.append(hour)
        else:
            assert (out["traces"]["waiting"], out["traces"]["taken_before"]) == (2, 0)
        clock.advance(RETRY_S)
    assert tried == [0, 1, 2, 4, 8]  # retried at once, then after 1, 2, 4 hours: the gaps grow
    records = await consumed.records()
    assert {
        (r["state"], r["failures"], r["failed_tries"], r["last_failure"]["cause"])
        for r in records.values()
    } == {
        ("claimed", 0, 5, "connection")
    }  # the endpoint's fault: never counted toward giving the runs up
    assert {
        datetime.fromisoformat(r["not_before"]) - datetime.fromisoformat(r["last_failure"]["at"])
        for r in records.values()
    } == {timedelta(hours=8)}
    status = await consumed.outcomes()
    assert (status["waiting"], status["to_retry"]) == (2, 0)
    assert status["next_try_at"] == next(iter(records.values()))["not_before"]
    back = await learn.ainvoke(
        {"from_traces": True}, context=ok
    )  # the endpoint is back: the runs still wait
    assert (back["traces"]["claimed"], back["traces"]["waiting"]) == (0, 2)
    clock.advance(8 * RETRY_S)
    back = await learn.ainvoke({"from_traces": True}, context=ok)
    assert (
        back["traces"]["claimed"] == 2
        and back["traces"]["consumed"] == 2
        and back["to_version"] == 1
    )
    assert {r["outcome"] for r in (await consumed.records()).values()} == {"learned"}
    assert set(await consumed.records()) == set(ids)


def test_the_wait_between_tries_doubles_and_is_capped():
    assert [retry_after_s(n) for n in range(1, 5)] == [0.0, RETRY_S, 2 * RETRY_S, 4 * RETRY_S]
    assert retry_after_s(40) == RETRY_MAX_S


async def test_a_reflection_that_fails_once_is_learned_next_round_and_its_count_is_kept_meanwhile():
    store = InMemoryStore()
    ok, _ = scripted(script(), embedder=bag_of_words)
    await production_runs(store, ok, 1)
    bad, _ = scripted(reflection_fails("{}"), embedder=bag_of_words, services=Services())
    learn = learn_builder.compile(store=store)
    await learn.ainvoke({"from_traces": True}, context=bad)
    [record] = (await consumed_in(store, "default", "default").records()).values()
    assert record["failures"] == 1 and record["state"] == "claimed"
    out = await learn.ainvoke({"from_traces": True}, context=ok)
    assert out["traces"]["consumed"] == 1 and out["to_version"] == 1
    [record] = (await consumed_in(store, "default", "default").records()).values()
    assert (record["state"], record["outcome"], record["failures"]) == ("consumed", "learned", 1)


async def test_a_failure_reported_by_a_round_that_lost_its_claim_leaves_the_new_claim_alone():
    store = InMemoryStore()
    consumed = consumed_in(store, "default", "default")
    await consumed.claim(["trace-1"], "learn-slow", None, 0.05)
    await asyncio.sleep(0.1)  # the slow round's claim expired; another round took the run
    assert (await consumed.claim(["trace-1"], "learn-next", None, 600))[0] == ["trace-1"]
    failure = {"cause": "parse", "error": "ParseFailure: not JSON", "counts": True}
    assert await consumed.release({"trace-1": failure}, "learn-slow") == []
    [record] = (await consumed.records()).values()
    assert (record["round"], record["state"], record.get("failures")) == (
        "learn-next",
        "claimed",
        None,
    )
    assert (await consumed.claim(["trace-1"], "learn-third", None, 600))[
        0
    ] == []  # still held by learn-next


# --- the loop: candidate -> canary ---------------------------------------------------------------


async def test_loop_puts_the_candidate_on_canary_and_waits_for_its_decision():
    store = InMemoryStore()
    ctx, _ = scripted(script(), embedder=bag_of_words)
    await production_runs(store, ctx, 4)
    loop = loop_builder.compile(store=store)
    first = await loop.ainvoke({"share": 50, "min_runs": 5, "max_runs": 20}, context=ctx)
    assert first["status"] == "learned" and first["traces"]["consumed"] == 4
    assert first["gate"]["claimed"] is False  # no run carried a target: no offline gate claimed
    assert first["canary"]["state"] == "collecting" and first["canary"]["version"] == 1
    assert first["canary"]["production"] == 0 and first["canary"]["started_by"] == "loop"
    labels = await playbooks_in(store).labels("default").get()
    assert [(e["label"], e["to"], e["by"]) for e in labels["events"]] == [
        ("production", 0, "loop"),
        ("canary", 1, "loop"),
    ]
    assert "learned from 4 runs" in labels["release"]["reason"]
    # more runs: served v0 or v1 by the split, never anything unreleased
    new = await production_runs(store, ctx, 6, start=10)
    served = {(await traces_in(store).get_trace(t))["playbook_version"] for t in new}
    assert served <= {0, 1}
    second = await loop.ainvoke({"share": 50}, context=ctx)
    assert second["status"] == "skipped" and "still on canary" in second["why"]
    assert [r["status"] for r in await rounds(store, "default", "default")] == [
        "learned",
        "skipped",
    ]


async def test_a_rolled_back_candidate_never_seeds_the_next_one():
    store = InMemoryStore()
    ctx, _ = scripted(script(), embedder=bag_of_words)
    await production_runs(store, ctx, 2)
    loop = loop_builder.compile(store=store)
    await loop.ainvoke({"share": 50}, context=ctx)
    await end_release(playbooks_in(store).labels("default"), "rollback", "eve", "harmful")
    await production_runs(store, ctx, 2, start=20)
    third = await loop.ainvoke({"share": 50}, context=ctx)
    assert third["reset"]["from"] == 1 and third["reset"]["items_of"] == 0
    head_of_reset = await playbooks_in(store).get("default", third["reset"]["to"])
    assert (
        head_of_reset.active == []
    )  # the rolled-back lesson is not in the base of the next candidate
    assert third["canary"]["production"] == 0


# --- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["learn", "--from-traces", "train.jsonl"], "give a task file or --from-traces"),
        (["learn"], "give a task file or --from-traces"),
        (["learn", "--from-traces", "--since", "yesterday"], "bad --since"),
        (["learn", "--from-traces", "--epochs", "2"], "--epochs"),
        (
            ["learn", "--from-traces", "--limit", "0"],
            "--limit must be a whole number from 1 to 10000, got 0",
        ),
        (["learn", "--since", "7d", "train.jsonl"], "--since goes with --from-traces"),
        (
            ["loop", "once", "--share", "100"],
            "--share must be a number above 0 and below 100, got 100",
        ),
        (["loop", "once", "--limit", "0"], "--limit must be a whole number from 1 to 1000, got 0"),
        (["loop", "install", "--every", "7x"], "bad --every"),
        (["feedback", "abcdef12"], "give --score"),
        (["feedback", "abcdef12", "--score", "1", "--correct", "4"], "give --score"),
        (["feedback", "abcdef12", "--correct", " "], "--correct needs the right answer"),
    ],
)
def test_bad_arguments_are_refused_with_one_line(args, message, tmp_path, monkeypatch):
    (tmp_path / "train.jsonl").write_text('{"input": "1+1", "target": "2"}\n')
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output


def cli_json(ctx, *args):
    out = runner.invoke(app, [*args, "--json"], obj=ctx)
    assert out.exit_code == 0, out.output
    return json.loads(out.output.strip().splitlines()[-1])


def test_the_command_line_closes_the_loop():
    ctx, _ = scripted(script(), embedder=bag_of_words)
    ids = [
        cli_json(
            ctx,
            "run",
            f"Add the two numbers {i} and {i + 1}: state the sum total.",
            "--mode",
            "direct",
        )["trace_id"]
        for i in range(3)
    ]
    corrected = cli_json(ctx, "feedback", ids[0][:8], "--correct", "1")
    assert (
        corrected["target"] == "1" and corrected["correct"] is False and corrected["score"] == 0.0
    )
    with_target = [t for t in (cli_json(ctx, "trace", i) for i in ids) if t.get("target")]
    assert [t["trace_id"] for t in with_target] == [ids[0]]  # the short id named the whole trace
    first = cli_json(ctx, "loop", "once", "--share", "50")
    assert first["status"] == "learned" and first["traces"]["by_signal"] == {
        "target": 1,
        "status": 2,
    }
    assert (
        first["gate"]["claimed"] is True and first["gate"]["val_size"] == 1
    )  # the corrected run, replayed
    assert first["canary"]["state"] == "collecting" and first["canary"]["version"] == 1
    status = cli_json(ctx, "loop", "status")
    assert [r["round"] for r in status["rounds"]] == [first["round"]] and status["canary"][
        "version"
    ] == 1
    learned = cli_json(ctx, "learn", "--from-traces")
    assert learned["traces"]["claimed"] == 0 and learned["traces"]["taken_before"] == 3
    table = runner.invoke(app, ["loop", "status"], obj=ctx)
    assert table.exit_code == 0 and "learned" in table.output and "collecting v1" in table.output


def test_loop_status_and_the_learn_summary_count_the_runs_waiting_and_given_up(clock):
    ok, _ = scripted(script(), embedder=bag_of_words)
    for i in range(2):
        cli_json(
            ok,
            "run",
            f"Add the two numbers {i} and {i + 1}: state the sum total.",
            "--mode",
            "direct",
        )
    bad, _ = scripted(reflection_fails("no JSON here"), embedder=bag_of_words, services=Services())
    for _ in range(MAX_FAILURES - 1):  # the first failure is tried again at once
        assert cli_json(bad, "loop", "once")["traces"]["to_retry"] == 2
    waiting = cli_json(bad, "loop", "once")  # two failures in a row: put off for RETRY_S
    assert (waiting["traces"]["claimed"], waiting["traces"]["waiting"]) == (0, 2)
    status = cli_json(bad, "loop", "status")
    assert {k: status["runs"][k] for k in ("claimed", "waiting", "to_retry")} == {
        "claimed": 0,
        "waiting": 2,
        "to_retry": 0,
    }
    next_try = datetime.fromisoformat(status["runs"]["next_try_at"])
    assert next_try == clock.at + timedelta(seconds=RETRY_S)
    table = " ".join(runner.invoke(app, ["loop", "status"], obj=bad).output.split())
    assert (
        f"2 waiting after failed reflections (the first tried again after {next_try:%Y-%m-%d %H:%M}"
        " UTC)" in table
    )
    clock.advance(RETRY_S)
    summary = runner.invoke(app, ["learn", "--from-traces"], obj=bad)
    assert summary.exit_code == 0, summary.output
    said = " ".join(summary.output.split())  # the terminal wraps lines
    assert (
        "stored runs learned from 0, to retry 0 (reflection failed), given up as unlearnable 2"
        in said
    )
    status = cli_json(bad, "loop", "status")
    assert status["runs"] == {
        "learned": 0,
        "unlearnable": 2,
        "claimed": 0,
        "waiting": 0,
        "to_retry": 0,
        "next_try_at": None,
    }
    table = runner.invoke(app, ["loop", "status"], obj=bad)
    assert table.exit_code == 0 and "2 given up as unlearnable" in " ".join(table.output.split()), (
        table.output
    )


async def test_a_trace_id_that_looks_like_a_card_number_is_kept_whole():
    store = InMemoryStore()
    trace_id = "4111111111111111" + "ab" * 8  # 32 hex digits whose first 16 pass a card check
    await traces_in(store).put_trace(
        {
            "trace_id": trace_id,
            "answer": "7",
            "status": "ok",
            "task_preview": "1+1?",
            "task_chars": 4,
            "feedback": [],
            "branches": [],
        }
    )
    assert (await traces_in(store).get_trace(trace_id))["trace_id"] == trace_id
    after = await correct_answer(store, "default", trace_id[:10], "2")
    assert after["trace_id"] == trace_id and after["target"] == "2"
    assert [t["trace_id"] for t in await traces_in(store).traces()] == [trace_id]


async def test_the_loop_rolls_back_its_own_undecided_canary_and_learns_again():
    store = InMemoryStore()
    ctx, _ = scripted(script(), embedder=bag_of_words)
    await production_runs(store, ctx, 2)
    loop = loop_builder.compile(store=store)
    await loop.ainvoke({"share": 50}, context=ctx)
    labels = playbooks_in(store).labels("default")

    def undecided(record):
        record["release"].update(
            status="undecided", undecided_reason="no decision after the last look"
        )

    await labels.change(undecided)
    await production_runs(store, ctx, 2, start=30)
    out = await loop.ainvoke({"share": 50}, context=ctx)
    assert (
        out["advanced"]["decision"] == "rollback"
        and "the loop rolled back its own candidate" in out["advanced"]["why"]
    )
    assert (
        out["status"] == "learned"
        and out["reset"]["items_of"] == 0
        and out["canary"]["version"] == 3
    )
    ended = (await labels.get())["releases"][-1]
    assert (ended["decided_by"], ended["decision"]) == ("loop", "rollback")


async def test_a_long_task_is_kept_whole_and_learned_from_whole():
    store = InMemoryStore()
    ctx, calls = scripted(script(), embedder=bag_of_words)
    task = (
        "Add the two numbers 2 and 3: state the sum total. "
        + "The numbers come from the ledger. " * 10
    )
    out = await solve_builder.compile(store=store).ainvoke(
        {"task": task, "mode": "direct"}, context=ctx
    )
    trace = await traces_in(store).get_trace(out["trace_id"])
    assert len(trace["task_preview"]) == 200 and trace["task"] == task
    await learn_builder.compile(store=store).ainvoke({"from_traces": True}, context=ctx)
    assert any(task.strip() in p for p, _ in calls if "You review one solved task" in p)
