"""Gray release end to end: the solve graph serves a canary by thread, records it, and the rule
decides.

Runs go through the real solve graph with a scripted model whose answers are right unless
the canary's lesson is in the prompt, so the canary's success rate is known.
"""

from __future__ import annotations

import asyncio
import json
import re

from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.data_loop import release_builder
from parallax.graphs.solve import builder
from parallax.logic.release_decision import Rule
from parallax.logic.releases import count_trial, start_release
from parallax.runtime.storage.stores import playbooks_in, traces_in
from parallax.state.playbook import Operation
from testkit.scripted_model import scripted

runner = CliRunner()
GOOD, BAD = "Add the two numbers given in the question.", "BADLESSON: answer seven to every sum."


def answers_seven_with_the_bad_lesson(prompt: str, t: float, i: int) -> str:
    return json.dumps({"reasoning": "r", "answer": "7" if "BADLESSON" in prompt else "4"})


async def two_versions(store) -> None:
    playbooks = playbooks_in(store)
    await playbooks.commit("fin", 0, [Operation(op="add", text=GOOD)], "test")
    await playbooks.commit("fin", 1, [Operation(op="add", text=BAD)], "test")


async def run_on(graph, ctx, thread: str) -> dict:
    return await graph.ainvoke(
        {"task": "What is 2 + 2?", "mode": "direct", "playbook": "fin", "target": "4"},
        {"configurable": {"thread_id": thread}},
        context=ctx,
    )


async def test_a_worse_canary_is_served_by_thread_recorded_and_rolled_back_by_itself():
    store = InMemoryStore()
    await two_versions(store)
    labels = playbooks_in(store).labels("fin")
    await start_release(
        labels, 2, 50, "alice", "try v2", Rule(min_runs=8, max_runs=64), False, production=1
    )
    ctx, _ = scripted(answers_seven_with_the_bad_lesson)
    graph = builder.compile(store=store)
    outs = []
    for i in range(200):
        outs.append(await run_on(graph, ctx, f"thread-{i}"))
        if (await labels.get())["release"] is None:
            break
    record = await labels.get()
    done = record["releases"][-1]
    assert (
        done["decision"] == "rollback"
        and done["decided_by"] == "auto"
        and "canary worse" in done["why"]
    )
    assert record["production"] == 1 and record["canary"] is None
    assert [(e["label"], e["from"], e["to"], e["by"]) for e in record["events"]] == [
        ("production", None, 1, "alice"),
        ("canary", None, 2, "alice"),
        ("canary", 2, None, "auto"),
    ]
    counted = done["arms"]["canary"]["runs"] + done["arms"]["production"]["runs"]
    assert counted == len(outs) and done["arms"]["canary"]["successes"] == 0
    assert done["arms"]["production"]["successes"] == done["arms"]["production"]["runs"]
    traces = {t["trace_id"]: t for t in await traces_in(store).traces()}
    for out in outs:
        trace = traces[out["trace_id"]]
        arm = trace["served"]["playbook/fin"]["arm"]
        assert trace["playbook_version"] == out["playbook_version"] == (2 if arm == "canary" else 1)
        assert trace["correct"] is (arm == "production") and trace["duration_ms"] >= 0
    # a conversation keeps its version for the whole release: the same thread again
    again = await run_on(graph, ctx, "thread-0")
    assert again["playbook_version"] == 1  # after the rollback, production for everyone


async def test_a_thread_keeps_its_version_while_the_canary_runs():
    store = InMemoryStore()
    await two_versions(store)
    await start_release(
        playbooks_in(store).labels("fin"), 2, 50, "alice", "", Rule(), True, production=1
    )
    ctx, _ = scripted(answers_seven_with_the_bad_lesson)
    graph = builder.compile(store=store)
    first = [(await run_on(graph, ctx, f"t{i}"))["playbook_version"] for i in range(12)]
    second = [(await run_on(graph, ctx, f"t{i}"))["playbook_version"] for i in range(12)]
    assert first == second and set(first) == {1, 2}
    assert (await playbooks_in(store).labels("fin").get())["release"][
        "status"
    ] == "collecting"  # manual: no decision


async def test_concurrent_runs_count_every_trial_and_only_one_decides():
    store = InMemoryStore()
    await two_versions(store)
    labels = playbooks_in(store).labels("fin")
    release = await start_release(
        labels, 2, 50, "alice", "", Rule(min_runs=20, max_runs=20), False, production=1
    )
    # 20 trials on each arm arrive at once (the canary's all failures): the look at 20 per arm
    # happens once
    results = await asyncio.gather(
        *(
            count_trial(labels, release["id"], arm, 1, int(arm == "production"))
            for arm in ("canary", "production")
            for _ in range(20)
        )
    )
    assert sum(r is not None for r in results) == 1
    record = await labels.get()
    assert len(record["releases"]) == 1 and record["releases"][0]["arms"]["canary"]["runs"] == 20
    assert (
        record["releases"][0]["decision"] == "rollback" and len(record["releases"][0]["looks"]) == 1
    )
    assert [e["by"] for e in record["events"]].count("auto") == 1
    assert (
        await count_trial(labels, release["id"], "canary", 1, 1) is None
    )  # an ended release counts nothing


async def test_concurrent_graph_runs_under_a_release_lose_no_trial():
    store = InMemoryStore()
    await two_versions(store)
    labels = playbooks_in(store).labels("fin")
    await start_release(labels, 2, 50, "alice", "", Rule(), True, production=1)
    ctx, _ = scripted(answers_seven_with_the_bad_lesson)
    graph = builder.compile(store=store)
    await asyncio.gather(*(run_on(graph, ctx, f"c{i}") for i in range(16)))
    arms = (await labels.get())["release"]["arms"]
    assert arms["canary"]["runs"] + arms["production"]["runs"] == 16


async def test_the_release_graph_starts_shows_and_ends_a_canary():
    store = InMemoryStore()
    await two_versions(store)
    graph = release_builder.compile(store=store)
    out = await graph.ainvoke(
        {
            "subject": "playbook/fin",
            "action": "release",
            "version": 2,
            "canary": 20,
            "by": "bob",
            "reason": "api test",
        }
    )
    assert (
        out["view"]["running"]
        and out["view"]["release"]["share"] == 20
        and out["view"]["production"] == 1
    )
    out = await graph.ainvoke(
        {"subject": "playbook/fin", "action": "promote", "by": "bob", "reason": "looks fine"}
    )
    assert out["view"]["production"] == 2 and not out["view"]["running"]
    assert (
        out["view"]["release"]["decision"] == "promote"
        and out["view"]["release"]["decided_by"] == "bob"
    )


def cli(*args: str, ctx=None):
    return runner.invoke(app, list(args), obj=ctx)


def seed_cli_versions() -> None:
    from parallax.runtime.storage.stores import open_sqlite_store

    async def main():
        async with open_sqlite_store() as store:
            await two_versions(store)

    asyncio.run(main())


def test_cli_release_run_and_canary(tmp_path):
    seed_cli_versions()
    ctx, _ = scripted(answers_seven_with_the_bad_lesson)
    started = cli(
        "playbook",
        "release",
        "2",
        "--canary",
        "50",
        "--playbook",
        "fin",
        "--min-runs",
        "4",
        "--max-runs",
        "16",
        "--by",
        "carol",
        "--reason",
        "first try",
        "--json",
    )
    assert started.exit_code == 0, started.output
    assert json.loads(started.output)["base"] == 1
    for _ in range(60):
        out = cli(
            "run",
            "What is 2 + 2?",
            "--mode",
            "direct",
            "--playbook",
            "fin",
            "--target",
            "4",
            "--json",
            ctx=ctx,
        )
        assert out.exit_code == 0, out.output
        view = json.loads(cli("playbook", "canary", "--playbook", "fin", "--json").output)
        if not view["running"]:
            break
    assert view["release"]["decision"] == "rollback" and view["production"] == 1
    arms = view["release"]["arms"]
    assert arms["canary"]["success_rate"] == 0.0 and arms["production"]["success_rate"] == 1.0
    assert arms["canary"]["ci95"][1] < arms["production"]["ci95"][0]
    assert arms["production"]["accuracy"] == 1.0 and arms["canary"]["accuracy"] == 0.0
    table = runner.invoke(app, ["playbook", "canary", "--playbook", "fin"], env={"COLUMNS": "80"})
    assert "rollback by auto" in table.output
    cells = [
        re.split(r"\s{2,}", line.strip()) for line in table.output.splitlines()
    ]  # columns: 2+ spaces apart
    rows = {c[0]: c[1:] for c in cells if len(c) == 3}
    assert (
        rows["success"] == ["100.0%", "0.0%"]
        and rows["accuracy (runs)"][1] == f"0.0% ({arms['canary']['runs']})"
    )
    assert rows["runs"] == [str(arms["production"]["runs"]), str(arms["canary"]["runs"])]
    history = json.loads(
        cli("playbook", "history", "--playbook", "fin", "--labels", "--json").output
    )
    moves = [(r["label"], r["to"], r["by"]) for r in history if "label" in r]
    assert moves == [("production", 1, "carol"), ("canary", 2, "carol"), ("canary", None, "auto")]


def test_cli_release_refuses_bad_input_with_one_line():
    seed_cli_versions()
    for args, message in (
        (("9", "--canary", "10"), "no version 9"),
        (("2", "--canary", "0"), "canary share"),
        (("2", "--canary", "10", "--error-rate", "0.9"), "error rate"),
    ):
        out = cli("playbook", "release", *args, "--playbook", "fin")
        assert (
            out.exit_code == 2
            and message in out.output
            and len(out.output.strip().splitlines()) == 1
        ), out.output
    assert cli("playbook", "release", "2", "--canary", "10", "--playbook", "fin").exit_code == 0
    again = cli("playbook", "release", "2", "--canary", "10", "--playbook", "fin")
    assert again.exit_code == 2 and "already has v2 on canary" in again.output
    both = cli("playbook", "canary", "--playbook", "fin", "--promote", "--rollback")
    assert both.exit_code == 2
    decided = cli("playbook", "canary", "--playbook", "fin", "--promote", "--by", "dave", "--json")
    assert json.loads(decided.output)["production"] == 2
    none = cli("playbook", "canary", "--playbook", "fin", "--rollback")
    assert none.exit_code == 2 and "no canary running" in none.output
