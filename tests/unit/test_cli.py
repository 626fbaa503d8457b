"""The CLI contract: bad input exits 2 with one line and writes nothing; --json prints one
object."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from testkit.scripted_model import scripted

runner = CliRunner()


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "   "], "the task is empty"),
        (["run"], "no task"),
        (["run", "hi", "--mode", "shout"], "unknown mode"),
        (["run", "hi", "--votes", "0"], "--votes must be a whole number from 1 to 1000, got 0"),
        (["run", "hi", "--votes", "-3"], "--votes must be a whole number from 1 to 1000, got -3"),
        (["run", "hi", "--votes", "3", "--min-votes", "4"], "--min-votes must be between"),
        (
            ["run", "hi", "--concurrency", "2000"],
            "--concurrency must be a whole number from 1 to 1024, got 2000",
        ),
        (
            ["run", "hi", "--max-tokens", "0"],
            "--max-tokens must be a whole number from 1 to 10000000000, got 0",
        ),
        (["run", "--input-file", "/no/such/file.txt"], "input file not found"),
        (["run", "hi", "--input-file", "x.txt"], "not both"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(args, message, tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("PARALLAX_HOME", str(home))
    model_ctx, calls = scripted(lambda p, t, i: "{}")
    result = runner.invoke(app, args, obj=model_ctx)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not home.exists() and calls == []


def test_non_utf8_file_is_refused(tmp_path, monkeypatch):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café".encode("latin-1"))
    result = runner.invoke(app, ["run", "--input-file", str(bad)])
    assert result.exit_code == 2 and "not UTF-8" in result.output


def test_run_json_prints_the_contract_and_checkpoints_the_thread(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("PARALLAX_HOME", str(home))
    model_ctx, _ = scripted(lambda p, t, i: json.dumps({"reasoning": "r", "answer": "22"}))
    result = runner.invoke(
        app,
        ["run", "17 sheep plus 5 sheep: how many?", "--votes", "3", "--thread", "t-1", "--json"],
        obj=model_ctx,
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    for key in (
        "answer",
        "mode",
        "status",
        "confidence",
        "branches",
        "vote_counts",
        "trace_id",
        "thread_id",
        "playbook_version",
    ):
        assert key in out
    assert (out["answer"], out["mode"], out["status"], out["vote_counts"], out["thread_id"]) == (
        "22",
        "vote",
        "ok",
        {"22": 3},
        "t-1",
    )
    assert {b["kind"] for b in out["branches"]} == {"vote", "safety"}
    assert all(
        {"id", "kind", "status", "output", "latency_ms", "tokens"} <= set(b)
        for b in out["branches"]
    )
    assert (home / "checkpoints.sqlite").stat().st_size > 0
    assert "task" not in out and "slices" not in out  # output schema only
    assert (
        out["resources"]["peak_rss_mb"] > 50 and out["resources"]["model_server"] is None
    )  # scripted: no server


def test_failed_run_exits_1(tmp_path, monkeypatch):
    model_ctx, _ = scripted(lambda p, t, i: ValueError("endpoint says no"))
    result = runner.invoke(app, ["run", "What is 2 + 2?", "--votes", "2", "--json"], obj=model_ctx)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["status"] == "failed"
