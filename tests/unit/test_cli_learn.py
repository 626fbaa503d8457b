"""`parallax learn` and `parallax eval` through the CLI, with a scripted model."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import nodes.consolidate
from parallax.cli import app
from tests.fakes import install
from tests.unit.test_learn_graph import bag_of_words, scripted, tasks

runner = CliRunner()


def write_tasks(path, n, target="2.0"):
    path.write_text("".join(json.dumps({"context": t["input"], "target": target}) + "\n" for t in tasks(n)))
    return path


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(nodes.consolidate, "embed", bag_of_words)
    return install(monkeypatch, scripted(lambda p: "2.0"))


def test_learn_json_contract_then_eval_and_history(tmp_path, fake):
    train, val = write_tasks(tmp_path / "train.jsonl", 4), write_tasks(tmp_path / "val.jsonl", 3)
    result = runner.invoke(app, ["learn", str(train), "--val", str(val), "--batch", "2", "--playbook", "fin", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["playbook"], out["from_version"], out["to_version"], out["accepted"]) == ("fin", 0, 2, True)
    assert out["val_accuracy_before"] == 1.0 and out["val_accuracy_after"] == 1.0
    assert [set(b) >= {"reflections", "operations", "items_added", "items_total", "guard_triggered"} for b in out["batches"]] == [True, True]

    evaluated = runner.invoke(app, ["eval", str(val), "--playbook", "fin", "--version", "1", "--json"])
    assert evaluated.exit_code == 0, evaluated.output
    report = json.loads(evaluated.stdout)
    assert (report["accuracy"], report["n"], report["errors"], report["playbook_version"]) == (1.0, 3, 0, 1)
    lines = open(report["results_file"]).read().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["correct"] is True

    history = json.loads(runner.invoke(app, ["playbook", "history", "--playbook", "fin", "--json"]).stdout)
    assert [h["version"] for h in history] == [1, 2]


def test_bad_jsonl_names_the_line_and_skip_bad_continues(tmp_path, fake):
    train = write_tasks(tmp_path / "train.jsonl", 2)
    train.write_text(train.read_text() + "{not json\n" + json.dumps({"target": "1"}) + "\n")
    result = runner.invoke(app, ["learn", str(train), "--json"])
    assert result.exit_code == 2 and "train.jsonl:3" in result.output and "--skip-bad" in result.output
    result = runner.invoke(app, ["learn", str(train), "--skip-bad", "--batch", "2", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["batches"][0]["reflections"] == 2


@pytest.mark.parametrize("args, message", [
    (["learn", "missing.jsonl"], "task file not found"),
    (["learn", "TRAIN", "--batch", "0"], "--batch must be at least 1"),
    (["learn", "TRAIN", "--epochs", "0"], "--epochs must be at least 1"),
    (["eval", "TRAIN", "--playbook", "nope"], "unknown playbook 'nope'"),
    (["eval", "TRAIN", "--version", "9"], "has no versions yet"),
])
def test_bad_learn_and_eval_input_exits_2(tmp_path, fake, args, message):
    train = write_tasks(tmp_path / "train.jsonl", 2)
    result = runner.invoke(app, [str(train) if a == "TRAIN" else a for a in args])
    assert result.exit_code == 2, result.output
    assert message in result.output
