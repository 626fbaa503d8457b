"""`parallax export sft|preferences`: every line checked against its format by hand, secrets redacted, counts printed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from tests.support.scripted_model import scripted

runner = CliRunner()
SECRET_TASK = "Contact bob@example.com (key sk-abcdefghijklmnopqrstuvwx1234). What is 2 + 2?"


def script(prompt: str, temperature: float, index: int) -> str:
    """Votes at low temperature say 4, at high temperature 5; 'three' questions are answered 3."""
    if "You read part" in prompt:
        return json.dumps({"relevant": True, "points": ["four"]})
    if "What is 1 + 2?" in prompt:
        return json.dumps({"reasoning": "one plus two", "answer": "3"})
    answer = "4" if temperature < 0.7 else "5"
    return json.dumps({"reasoning": "adding", "answer": answer})


def run(ctx, *args: str) -> dict:
    out = runner.invoke(app, ["run", *args, "--json"], obj=ctx)
    assert out.exit_code == 0, out.output
    return json.loads(out.output.strip().splitlines()[-1])


@pytest.fixture
def history():
    """Runs with known answers, a vote run with a split, duplicates, a section run and feedback."""
    ctx, _ = scripted(script)
    right = run(ctx, SECRET_TASK, "--mode", "direct", "--target", "4")          # right (temperature 0.2)
    run(ctx, SECRET_TASK, "--mode", "direct", "--target", "4")                  # same prompt: a duplicate
    run(ctx, "What is 2 + 3?", "--mode", "direct", "--target", "5")             # wrong
    liked = run(ctx, "What is 1 + 2?", "--mode", "direct")                      # no target, feedback up
    runner.invoke(app, ["feedback", liked["trace_id"], "--score", "up"])
    split = run(ctx, SECRET_TASK, "--mode", "vote", "--votes", "5", "--target", "4")  # 0.3,0.475,0.65 say 4; 0.825,1.0 say 5
    run(ctx, "What is 1 + 2?", "--mode", "vote", "--votes", "3", "--target", "3")  # every vote right: no pair
    section = run(ctx, "# A\n" + "x " * 40 + "\n# B\n" + "y " * 40, "--mode", "section")
    runner.invoke(app, ["feedback", section["trace_id"], "--score", "up"])
    return {"right": right, "liked": liked, "split": split}


def roles(messages: list[dict]) -> list[str]:
    assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) and m["content"] for m in messages)
    return [m["role"] for m in messages]


def lines(path) -> list[dict]:
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def export(*args: str) -> dict:
    out = runner.invoke(app, ["export", *args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def test_sft_lines_are_openai_chat_examples_of_right_runs(history, tmp_path):
    path = tmp_path / "sft.jsonl"
    report = export("sft", "--out", str(path))
    found = lines(path)
    assert report["written"] == len(found) == 4  # right direct, liked direct, the two vote runs' winning votes
    for line in found:
        assert set(line) == {"messages"} and roles(line["messages"]) == ["system", "user", "assistant"]
        reply = json.loads(line["messages"][2]["content"])
        assert set(reply) == {"reasoning", "answer"} and reply["answer"] in ("4", "3")
    assert report["left_out"]["wrong"] == 1 and report["left_out"]["duplicate prompt"] == 1
    assert sum(report["left_out"].values()) + report["written"] == report["runs"] == 7
    text = path.read_text()
    assert "bob@example.com" not in text and "sk-abcdef" not in text and "[REDACTED:email]" in text


def test_trl_and_openai_preferences_pair_a_right_vote_with_a_wrong_one(history, tmp_path):
    trl, openai = tmp_path / "trl.jsonl", tmp_path / "dpo.jsonl"
    report = export("preferences", "--format", "trl", "--out", str(trl))
    assert report["written"] == 1
    assert report["left_out"]["not a vote run"] == 5 and report["left_out"]["no pair: every vote was right"] == 1
    (line,) = lines(trl)
    assert set(line) == {"prompt", "chosen", "rejected"}
    assert roles(line["prompt"]) == ["system", "user"] and roles(line["chosen"]) == roles(line["rejected"]) == ["assistant"]
    assert json.loads(line["chosen"][0]["content"])["answer"] == "4"
    assert json.loads(line["rejected"][0]["content"])["answer"] == "5"
    assert "bob@example.com" not in json.dumps(line)
    export("preferences", "--format", "openai", "--out", str(openai))
    (dpo,) = lines(openai)
    assert set(dpo) == {"input", "preferred_output", "non_preferred_output"}
    assert set(dpo["input"]) == {"messages", "tools", "parallel_tool_calls"} and dpo["input"]["tools"] == []
    assert roles(dpo["input"]["messages"]) == ["system", "user"] and dpo["input"]["messages"] == line["prompt"]
    assert dpo["preferred_output"] == line["chosen"] and dpo["non_preferred_output"] == line["rejected"]


def test_kto_labels_each_run_with_a_verdict(history, tmp_path):
    path = tmp_path / "kto.jsonl"
    report = export("preferences", "--format", "kto", "--out", str(path))
    found = lines(path)
    for line in found:
        assert set(line) == {"prompt", "completion", "label"} and isinstance(line["label"], bool)
        assert roles(line["prompt"]) == ["system", "user"] and roles(line["completion"]) == ["assistant"]
    labels = sorted(line["label"] for line in found)
    assert labels == [False, True, True, True, True]  # wrong direct; right direct, liked, split vote, all-right vote
    assert report["left_out"]["duplicate prompt"] == 1


def test_the_command_prints_counts_and_reasons(history, tmp_path):
    out = runner.invoke(app, ["export", "sft", "--out", str(tmp_path / "x.jsonl")])
    assert out.exit_code == 0
    assert "wrote 4 sft examples" in out.output and "1 wrong" in out.output and "1 duplicate prompt" in out.output


@pytest.mark.parametrize("args, message", [
    (["sft", "--out", "x.txt"], "must be a .jsonl"), (["sft", "--out", "/nope/x.jsonl"], "does not exist"),
    (["sft", "--out", "x.jsonl", "--min-score", "2"], "--min-score"),
    (["preferences", "--out", "x.jsonl", "--format", "csv"], "unknown format")])
def test_bad_export_input_is_one_line_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = runner.invoke(app, ["export", *args])
    assert out.exit_code == 2 and message in out.output and len(out.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.jsonl").exists()


def test_the_format_check_refuses_lines_that_are_not_the_format():
    from pydantic import ValidationError

    from parallax.logic.exports import validate_line

    system, user = {"role": "system", "content": "s"}, {"role": "user", "content": "u"}
    a, b = [{"role": "assistant", "content": "a"}], [{"role": "assistant", "content": "b"}]
    good = {"sft": {"messages": [system, user, *a]}, "trl": {"prompt": [system, user], "chosen": a, "rejected": b},
            "openai": {"input": {"messages": [system, user], "tools": [], "parallel_tool_calls": True},
                       "preferred_output": a, "non_preferred_output": b},
            "kto": {"prompt": [system, user], "completion": a, "label": True}}
    for fmt, line in good.items():
        validate_line(fmt, line)
    bad = [("sft", {"messages": [system, user]}), ("sft", {"messages": [system, user, *a], "id": 1}),
           ("trl", {**good["trl"], "chosen": a + b}), ("trl", {**good["trl"], "prompt": [*a, user]}),
           ("openai", {**good["openai"], "preferred_output": [user]}),
           ("kto", {**good["kto"], "label": "yes"}), ("kto", {**good["kto"], "completion": [{"role": "assistant",
                                                                                              "content": ""}]})]
    for fmt, line in bad:
        with pytest.raises(ValidationError):
            validate_line(fmt, line)
