"""Versioned node prompts: defaults from prompts/templates.py, versions in the store, served to runs
and recorded per branch, edits through the gate and the gray release (`parallax prompts ...`)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.solve import builder as solve_builder
from parallax.logic.release_decision import Rule
from parallax.logic.releases import start_release
from parallax.prompts.solve import (
    answer_messages,
    judge_messages,
    red_team_messages,
    slice_messages,
)
from parallax.prompts.templates import DEFAULTS, problems, render
from parallax.runtime.storage.stores import prompts_in, traces_in
from testkit.scripted_model import scripted

runner = CliRunner()
EDIT = DEFAULTS["answer"].system.replace(
    "You solve tasks carefully.", "You solve tasks carefully. EDITED."
)


def test_default_templates_render_the_prompts_the_branches_always_had():
    system, user = answer_messages("T", "Q?", [{"id": "pb-1", "text": "L"}], short=True)
    assert (
        system.content
        == 'You solve tasks carefully. Reply with a JSON object with two keys: "reasoning" (one or'
        ' two sentences of working) and "answer" (only the final answer: a number, a word,'
        " yes/no or a short phrase). Reply with one JSON object only, no other text.\n\nLessons"
        " from earlier runs (use them when they apply):\n- [pb-1] L"
    )
    assert user.content == "T\n\nQuestion: Q?"
    # a slice's place is said last, beside its text, so the slices share everything before (a
    # cacheable prefix)
    assert (
        slice_messages("B", "Q", "P", 0, 2, [])[1].content
        == "Brief: B\nQuestion: Q\n\nPart 1 of 2:\nP"
    )
    assert "- a\n- b" in judge_messages("T", "", ["a", "b"])[1].content
    assert red_team_messages("T", "", "42")[1].content == "T\n\nProposed answer: 42"
    # a dollar sign in the task is text, never a placeholder
    assert (
        render("answer", None, answer_spec="x", lessons="", ask="Costs $75,000 and $x")[1].content
        == "Costs $75,000 and $x"
    )


def test_an_edit_must_keep_its_placeholders():
    assert problems("answer", EDIT, "$ask") == []
    assert (
        "required placeholder(s) left out: $lessons"
        in problems("answer", "no lessons here", "$ask")[0]
    )
    assert "unknown placeholder(s) $colour" in problems("answer", EDIT + "$colour", "$ask")[0]
    assert "no placeholder" in problems("answer", EDIT + " costs 5$", "$ask")[0]


async def test_runs_record_prompt_versions_per_branch_and_a_prompt_canary_splits_threads():
    store = InMemoryStore()
    prompts = prompts_in(store)
    await prompts.commit("answer", EDIT, "$ask", "test")
    await start_release(prompts.labels("answer"), 1, 50, "alice", "", Rule(), True, production=0)
    ctx, calls = scripted(lambda p, t, i: json.dumps({"reasoning": "r", "answer": "4"}))
    graph = solve_builder.compile(store=store)
    versions = {}
    for i in range(16):
        out = await graph.ainvoke(
            {"task": "What is 2 + 2?", "mode": "vote", "votes": 3},
            {"configurable": {"thread_id": f"t{i}"}},
            context=ctx,
        )
        trace = await traces_in(store).get_trace(out["trace_id"])
        votes = [b for b in trace["branches"] if b["kind"] == "vote"]
        assert len({b["prompt"]["version"] for b in votes}) == 1
        version = votes[0]["prompt"]["version"]
        versions[i] = version
        assert trace["served"]["prompt/answer"]["version"] == version
        assert ("EDITED." in trace["prompts"][votes[0]["prompt_key"]][0]["content"]) is (
            version == 1
        )
    assert set(versions.values()) == {0, 1}
    edited = sum("EDITED." in p for p, _ in calls)
    assert edited == 3 * sum(v == 1 for v in versions.values())


def cli(*args: str, ctx=None):
    return runner.invoke(app, ["prompts", *args], obj=ctx)


def test_cli_show_history_diff_set_release_rollback(tmp_path):
    listed = json.loads(cli("show", "--json").output)
    assert {r["name"] for r in listed} == set(DEFAULTS) and all(r["head"] == 0 for r in listed)
    edit = tmp_path / "system.txt"
    edit.write_text(EDIT)
    # without validation tasks the gate measures nothing: the edit is kept, saying so, as a learn
    # update is
    ok = cli("set", "answer", "--system", str(edit), "--by", "alice", "--json")
    assert ok.exit_code == 0, ok.output
    kept = json.loads(ok.output)
    assert (
        kept["version"] == 1
        and kept["reason"] == "no validation tasks: accepted without evaluation"
    )
    assert kept["gate"]["evaluated"] is False
    same = cli("set", "answer", "--system", str(edit), "--json")
    assert same.exit_code == 2 and "nothing to set" in same.output
    shown = json.loads(cli("show", "answer", "--json").output)
    assert shown["version"] == 1 and "EDITED." in shown["system"] and shown["created_by"] == "alice"
    diff = json.loads(cli("diff", "answer", "0", "1", "--json").output)
    assert (
        any(line.startswith("+") and "EDITED." in line for line in diff["system"])
        and diff["user"] == []
    )
    history = json.loads(cli("history", "answer", "--json").output)
    assert [v["version"] for v in history["versions"]] == [0, 1] and history["candidates"] == []
    # the edit was pinned out of production until released
    assert history["production"] == 0 and history["events"][0]["by"] == "alice"
    released = cli("release", "answer", "1", "--canary", "25", "--by", "bob", "--json")
    assert released.exit_code == 0, released.output
    view = json.loads(cli("canary", "answer", "--json").output)
    assert view["running"] and view["release"]["share"] == 25 and view["canary"] == 1
    rolled = cli("rollback", "answer", "0", "--by", "carol", "--json")
    assert rolled.exit_code == 0 and json.loads(rolled.output)["version"] == 2
    history = json.loads(cli("history", "answer", "--json").output)
    assert history["production"] == 2 and history["canary"] is None
    assert (
        history["events"][-1]["by"] == "carol" and "rollback to v0" in history["events"][-1]["why"]
    )


def test_cli_set_runs_the_gate_on_validation_tasks(tmp_path):
    edit = tmp_path / "system.txt"
    edit.write_text(EDIT)
    val = tmp_path / "val.jsonl"
    val.write_text(
        "".join(
            json.dumps({"question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
            for i in range(1, 7)
        )
    )

    def script(prompt, t, i):  # right with the served prompt, wrong with the edit
        n = int(re.search(r"What is (\d+) \+", prompt).group(1))
        return json.dumps({"reasoning": "r", "answer": "0" if "EDITED." in prompt else str(2 * n)})

    ctx, _ = scripted(script)
    out = cli("set", "answer", "--system", str(edit), "--val", str(val), "--json", ctx=ctx)
    result = json.loads(out.output)
    assert out.exit_code == 1 and result["accepted"] is False
    assert (
        result["reason"] == "validation accuracy fell from 1.0 to 0.0"
        and result["gate"]["val_size"] == 6
    )
    assert json.loads(cli("show", "answer", "--json").output)["version"] == 0
    assert not (asyncio.run(_traces()))  # the gate's runs are pinned and leave no traces


async def _traces():
    from parallax.runtime.storage.stores import open_sqlite_store

    async with open_sqlite_store() as store:
        return await traces_in(store).traces()


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "nope"], "unknown prompt 'nope'"),
        (["set", "answer"], "nothing to set"),
        (["set", "answer", "--system", "missing.txt"], "file not found"),
        (["diff", "answer", "0", "3"], "no version 3"),
        (["release", "answer", "4", "--canary", "10"], "no version 4"),
    ],
)
def test_bad_prompt_commands_are_one_line_exit_2(args, message):
    out = cli(*args)
    assert (
        out.exit_code == 2 and message in out.output and len(out.output.strip().splitlines()) == 1
    ), out.output


def test_a_broken_template_is_refused_before_anything_is_written(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("Answer. $json_rule")  # $lessons left out
    out = cli("set", "answer", "--system", str(bad), "--approve")
    assert out.exit_code == 2 and "required placeholder(s) left out: $lessons" in out.output
    assert json.loads(cli("history", "answer", "--json").output)["candidates"] == []
