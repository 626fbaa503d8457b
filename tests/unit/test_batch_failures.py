"""Failed tasks of `eval` and `learn` say why: a cause and an error per task, counts by cause in the
summary, and no trace id that `parallax trace` cannot find."""

from __future__ import annotations

import json

import httpx
import openai
from typer.testing import CliRunner

from parallax.cli import app
from parallax.logic.failures import failures_by_cause, run_failure
from testkit.scripted_model import scripted
from tests.unit.test_learn_graph import bag_of_words, learning_script, tasks

runner = CliRunner()


def connection_error() -> openai.APIConnectionError:
    return openai.APIConnectionError(
        request=httpx.Request("POST", "http://model.test/v1/chat/completions")
    )


def flaky_script(broken: str):
    """Every call about the task whose input holds `broken` cannot connect; the rest learn as
    usual."""
    learn = learning_script(lambda p: "2.0")

    def script(prompt, t, i):
        return connection_error() if broken in prompt else learn(prompt, t, i)

    return script


def write(path, rows):
    path.write_text(
        "".join(json.dumps({"context": t["input"], "target": t["target"]}) + "\n" for t in rows)
    )
    return path


def test_a_failed_run_is_named_by_its_branches_most_common_cause():
    run = {
        "status": "failed",
        "reason": "all 3 branches failed: ...",
        "branches": [
            {"kind": "vote", "status": "failed", "cause": "connection"},
            {"kind": "vote", "status": "timeout", "cause": "timeout"},
            {"kind": "vote", "status": "failed", "cause": "connection"},
            {"kind": "safety", "status": "failed", "cause": "parse"},
        ],
    }
    assert run_failure(run) == {"cause": "connection", "error": "all 3 branches failed: ..."}
    assert run_failure({"status": "ok", "branches": []}) is None
    assert failures_by_cause(
        [{"cause": "parse"}, {}, {"cause": "connection"}, {"cause": "parse"}]
    ) == {"parse": 2, "connection": 1}


def test_eval_result_lines_carry_cause_and_error_and_the_summary_counts_them(tmp_path):
    rows = tasks(4)
    ctx, _ = scripted(flaky_script(rows[1]["input"]), embedder=bag_of_words, max_attempts=1)
    result = runner.invoke(
        app,
        ["eval", str(write(tmp_path / "val.jsonl", rows)), "--mode", "direct", "--json"],
        obj=ctx,
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["n"], out["errors"], out["failures"]) == (4, 1, {"connection": 1})
    lines = [json.loads(line) for line in open(out["results_file"])]
    failed = [line for line in lines if line["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["cause"] == "connection"
    assert (
        "APIConnectionError" in failed[0]["error"]
        and "ScriptedChatModel, failing since" in failed[0]["error"]
    )
    assert all("cause" not in line for line in lines if line["status"] == "ok")
    assert all("trace_id" not in line for line in lines)  # eval keeps no trace


def test_learn_batches_name_their_failed_tasks_and_the_summary_counts_them(tmp_path):
    rows = tasks(4)
    ctx, _ = scripted(flaky_script(rows[2]["input"]), embedder=bag_of_words, max_attempts=1)
    result = runner.invoke(
        app,
        ["learn", str(write(tmp_path / "train.jsonl", rows)), "--batch", "2", "--json"],
        obj=ctx,
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["failures"] == {"connection": 1} and out["val_failures"] == {}
    first, second = out["batches"]
    assert first["failures"] == {} and first["failed_tasks"] == []
    assert second["failures"] == {"connection": 1}
    [failed] = second["failed_tasks"]
    assert failed["cause"] == "connection" and "APIConnectionError" in failed["error"]
