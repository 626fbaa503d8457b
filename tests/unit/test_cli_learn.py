"""`parallax learn` and `parallax eval` through the CLI, with a scripted model."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from testkit.scripted_model import scripted
from tests.unit.test_learn_graph import bag_of_words, learning_script, tasks

runner = CliRunner()


def write_tasks(path, n, target="2.0"):
    path.write_text(
        "".join(json.dumps({"context": t["input"], "target": target}) + "\n" for t in tasks(n))
    )
    return path


@pytest.fixture
def fake():
    """The run Context every command of a test gets (a scripted model and a bag-of-words
    embedder)."""
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    return model_ctx


def test_learn_json_contract_then_eval_and_history(tmp_path, fake):
    train, val = write_tasks(tmp_path / "train.jsonl", 4), write_tasks(tmp_path / "val.jsonl", 3)
    # validation accuracy stays 1.0: a tie without signal, so each update needs a person's yes
    result = runner.invoke(
        app,
        [
            "learn",
            str(train),
            "--val",
            str(val),
            "--batch",
            "2",
            "--playbook",
            "fin",
            "--json",
            "--approve",
        ],
        obj=fake,
        input="yes\nyes\n",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert (out["playbook"], out["from_version"], out["to_version"], out["accepted"]) == (
        "fin",
        0,
        2,
        True,
    )
    assert all(
        b["reason"].startswith("approved by a person: a tie without signal") for b in out["batches"]
    )
    assert out["val_accuracy_before"] == 1.0 and out["val_accuracy_after"] == 1.0
    assert [
        set(b) >= {"reflections", "operations", "items_added", "items_total", "guard_triggered"}
        for b in out["batches"]
    ] == [True, True]

    evaluated = runner.invoke(
        app, ["eval", str(val), "--playbook", "fin", "--version", "1", "--json"], obj=fake
    )
    assert evaluated.exit_code == 0, evaluated.output
    report = json.loads(evaluated.stdout)
    assert (report["accuracy"], report["n"], report["errors"], report["playbook_version"]) == (
        1.0,
        3,
        0,
        1,
    )
    lines = open(report["results_file"]).read().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["correct"] is True

    history = json.loads(
        runner.invoke(app, ["playbook", "history", "--playbook", "fin", "--json"], obj=fake).stdout
    )
    assert [h["version"] for h in history] == [1, 2]


def test_bad_jsonl_names_the_line_and_skip_bad_continues(tmp_path, fake):
    train = write_tasks(tmp_path / "train.jsonl", 2)
    train.write_text(train.read_text() + "{not json\n" + json.dumps({"target": "1"}) + "\n")
    result = runner.invoke(app, ["learn", str(train), "--json"], obj=fake)
    assert (
        result.exit_code == 2 and "train.jsonl:3" in result.output and "--skip-bad" in result.output
    )
    result = runner.invoke(
        app, ["learn", str(train), "--skip-bad", "--batch", "2", "--json"], obj=fake
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["batches"][0]["reflections"] == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["learn", "missing.jsonl"], "task file not found"),
        (
            ["learn", "TRAIN", "--batch", "0"],
            "--batch must be a whole number from 1 to 1000, got 0",
        ),
        (
            ["learn", "TRAIN", "--epochs", "0"],
            "--epochs must be a whole number from 1 to 100, got 0",
        ),
        (
            ["learn", "TRAIN", "--epochs", "100000000"],
            "--epochs must be a whole number from 1 to 100, got 100000000",
        ),
        (
            ["learn", "TRAIN", "--concurrency", "2000"],
            "--concurrency must be a whole number from 1 to 1024, got 2000",
        ),
        (
            ["learn", "TRAIN", "--votes", "1001"],
            "--votes must be a whole number from 1 to 1000, got 1001",
        ),
        (
            ["eval", "TRAIN", "--votes", "1001"],
            "--votes must be a whole number from 1 to 1000, got 1001",
        ),
        (["eval", "TRAIN", "--playbook", "nope"], "unknown playbook 'nope'"),
        (["eval", "TRAIN", "--version", "9"], "has no versions yet"),
    ],
)
def test_bad_learn_and_eval_input_exits_2(tmp_path, fake, args, message):
    train = write_tasks(tmp_path / "train.jsonl", 2)
    result = runner.invoke(app, [str(train) if a == "TRAIN" else a for a in args], obj=fake)
    assert result.exit_code == 2, result.output
    assert message in result.output
