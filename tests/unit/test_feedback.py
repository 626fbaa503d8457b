"""`parallax feedback` and the `feedback` graph: stored with the trace, per tenant, redacted; bad
input writes nothing."""

from __future__ import annotations

import asyncio
import json

import pytest
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.data_loop import feedback_builder
from parallax.graphs.solve import builder as solve_builder
from parallax.logic.feedback import BadFeedback, give_feedback, parse_score
from parallax.logic.release_decision import Rule
from parallax.logic.releases import start_release
from parallax.runtime.storage.stores import open_sqlite_store, playbooks_in, traces_in
from parallax.state.playbook import Operation
from testkit.scripted_model import scripted

runner = CliRunner()


def answer(text: str) -> str:
    return json.dumps({"reasoning": "r", "answer": text})


def run_json(ctx, *args: str) -> dict:
    out = runner.invoke(app, ["run", *args, "--json"], obj=ctx)
    assert out.exit_code == 0, out.output
    return json.loads(out.output.strip().splitlines()[-1])


def stored(trace_id: str, tenant: str = "default") -> dict:
    async def main():
        async with open_sqlite_store() as store:
            return await traces_in(store, tenant).get_trace(trace_id)

    return asyncio.run(main())


def test_scores_and_words():
    assert parse_score("up") == 1.0 and parse_score("DOWN") == 0.0 and parse_score("0.25") == 0.25
    for bad in ("1.5", "-0.1", "nan", "great", ""):
        with pytest.raises(BadFeedback):
            parse_score(bad)


def test_feedback_is_stored_with_the_trace_redacted():
    ctx, _ = scripted(lambda p, t, i: answer("9"))
    out = run_json(ctx, "What is 4 + 5?", "--mode", "direct", "--tenant", "acme")
    result = runner.invoke(
        app,
        [
            "feedback",
            out["trace_id"],
            "--score",
            "down",
            "--tenant",
            "acme",
            "--by",
            "eve",
            "--comment",
            "wrong; mail me at eve@example.com, key sk-abcdefghijklmnopqrstuvwx1234",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["score"] == 0.0
    runner.invoke(app, ["feedback", out["trace_id"], "--score", "0.8", "--tenant", "acme"])
    trace = stored(out["trace_id"], "acme")
    assert [f["score"] for f in trace["feedback"]] == [0.0, 0.8] and trace["feedback"][0][
        "by"
    ] == "eve"
    text = json.dumps(trace)
    assert "eve@example.com" not in text and "sk-abcdef" not in text and "[REDACTED:email]" in text


@pytest.mark.parametrize(
    "args, message", [(["--score", "1.5"], "bad score"), (["--score", "meh"], "bad score")]
)
def test_a_bad_score_exits_2_and_writes_nothing(args, message):
    ctx, _ = scripted(lambda p, t, i: answer("9"))
    out = run_json(ctx, "What is 4 + 5?", "--mode", "direct")
    before = stored(out["trace_id"])
    result = runner.invoke(app, ["feedback", out["trace_id"], *args])
    assert (
        result.exit_code == 2
        and message in result.output
        and len(result.output.strip().splitlines()) == 1
    )
    assert stored(out["trace_id"]) == before


def test_an_unknown_trace_or_another_tenants_exits_2_and_writes_nothing():
    none = runner.invoke(app, ["feedback", "nope", "--score", "up"])
    assert none.exit_code == 2 and "no runs recorded" in none.output
    ctx, _ = scripted(lambda p, t, i: answer("9"))
    out = run_json(ctx, "What is 4 + 5?", "--mode", "direct", "--tenant", "acme")
    other = runner.invoke(app, ["feedback", out["trace_id"], "--score", "up", "--tenant", "globex"])
    assert other.exit_code == 2 and "no trace" in other.output
    assert stored(out["trace_id"], "acme")["feedback"] == []


async def test_two_people_scoring_one_run_at_once_keep_both():
    store = InMemoryStore()
    ctx, _ = scripted(lambda p, t, i: answer("9"))
    out = await solve_builder.compile(store=store).ainvoke(
        {"task": "What is 4 + 5?", "mode": "direct"}, context=ctx
    )
    await asyncio.gather(
        *(
            give_feedback(store, "default", out["trace_id"], s, by=f"p{s}")
            for s in ("0.1", "0.2", "0.3", "0.4", "0.5")
        )
    )
    trace = await traces_in(store).get_trace(out["trace_id"])
    assert sorted(f["score"] for f in trace["feedback"]) == [0.1, 0.2, 0.3, 0.4, 0.5]


async def test_the_feedback_graph_stores_feedback_and_refuses_bad_input():
    store = InMemoryStore()
    ctx, _ = scripted(lambda p, t, i: answer("9"))
    run = await solve_builder.compile(store=store).ainvoke(
        {"task": "What is 4 + 5?", "mode": "direct", "tenant": "acme"}, context=ctx
    )
    graph = feedback_builder.compile(store=store)
    out = await graph.ainvoke(
        {"trace_id": run["trace_id"], "score": "up", "comment": "ok", "tenant": "acme"}
    )
    assert out["score"] == 1.0 and out["feedback"][0]["by"] == "api"
    with pytest.raises(ValueError, match="bad score 7"):
        await graph.ainvoke({"trace_id": run["trace_id"], "score": 7, "tenant": "acme"})
    with pytest.raises(ValueError, match="no trace"):
        await graph.ainvoke({"trace_id": "nope", "score": 1, "tenant": "acme"})
    assert len((await traces_in(store, "acme").get_trace(run["trace_id"]))["feedback"]) == 1


async def test_feedback_corrects_the_trial_of_a_running_canary():
    store = InMemoryStore()
    playbooks = playbooks_in(store)
    await playbooks.commit("fin", 0, [Operation(op="add", text="lesson one")], "t")
    await playbooks.commit("fin", 1, [Operation(op="add", text="lesson two")], "t")
    labels = playbooks.labels("fin")
    await start_release(labels, 2, 50, "a", "", Rule(), True, production=1)
    ctx, _ = scripted(lambda p, t, i: answer("9"))
    graph = solve_builder.compile(store=store)
    run = await graph.ainvoke(
        {"task": "What is 4 + 5?", "mode": "direct", "playbook": "fin"},
        {"configurable": {"thread_id": "x1"}},
        context=ctx,
    )
    arm = (await traces_in(store).get_trace(run["trace_id"]))["served"]["playbook/fin"]["arm"]
    assert (await labels.get())["release"]["arms"][arm] == {"runs": 1, "successes": 1}
    await give_feedback(store, "default", run["trace_id"], "down")
    assert (await labels.get())["release"]["arms"][arm] == {"runs": 1, "successes": 0}
    await give_feedback(
        store, "default", run["trace_id"], "0.0"
    )  # no change of verdict: no change of count
    await give_feedback(store, "default", run["trace_id"], "up")
    assert (await labels.get())["release"]["arms"][arm] == {"runs": 1, "successes": 1}
