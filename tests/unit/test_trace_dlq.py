"""`parallax trace` and `parallax dlq`: stored lifecycles, redaction, dead letters and their
retries."""

from __future__ import annotations

import asyncio
import json
import threading

from typer.testing import CliRunner

from parallax.cli import app
from parallax.cli.trace import retry_letter
from parallax.runtime.storage.namespaces import StoreError
from parallax.runtime.storage.stores import open_sqlite_store
from parallax.runtime.storage.trace_store import TraceStore
from testkit.scripted_model import scripted
from tests.unit.test_lifecycle import replayed
from tests.unit.test_solve_graph import _error

runner = CliRunner()


def answer(text: str) -> str:
    return json.dumps({"reasoning": "r", "answer": text})


def run_json(model_ctx, *args: str) -> dict:
    result = runner.invoke(app, ["run", *args, "--json"], obj=model_ctx)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output.strip().splitlines()[-1])


def test_trace_shows_every_branch_lifecycle_redacted(monkeypatch):
    model_ctx, _ = scripted(
        lambda p, t, i: answer("Mail alice@example.com with key sk-abcdefghijklmnopqrstuvwx1234")
    )
    out = run_json(
        model_ctx, "What is 4 + 5? Reply to bob@example.org", "--mode", "vote", "--votes", "3"
    )
    result = runner.invoke(app, ["trace", out["trace_id"], "--json"], obj=model_ctx)
    assert result.exit_code == 0, result.output
    trace = json.loads(result.output)
    assert trace["trace_id"] == out["trace_id"] and trace["status"] == out["status"]
    assert [b["kind"] for b in trace["branches"]].count("vote") == 3
    assert [replayed(b["transitions"]) for b in trace["branches"]] == ["COMPLETED"] * len(
        trace["branches"]
    )
    stored = json.dumps(trace)
    assert (
        "alice@example.com" not in stored
        and "bob@example.org" not in stored
        and "sk-abcdef" not in stored
    )
    assert "[REDACTED:email]" in stored
    table = runner.invoke(app, ["trace", out["trace_id"]], env={"COLUMNS": "250"}, obj=model_ctx)
    assert "PENDING > DISPATCHED > IN_PROGRESS > COMPLETED" in table.output


def test_an_unknown_trace_or_tenant_is_one_line_exit_2(monkeypatch):
    model_ctx, _ = scripted(lambda p, t, i: answer("9"))
    missing = runner.invoke(app, ["trace", "nope"], obj=model_ctx)
    assert missing.exit_code == 2 and "no runs recorded" in missing.output
    out = run_json(model_ctx, "What is 4 + 5?", "--mode", "direct", "--tenant", "acme")
    other = runner.invoke(app, ["trace", out["trace_id"], "--tenant", "globex"], obj=model_ctx)
    assert (
        other.exit_code == 2
        and "no trace" in other.output
        and len(other.output.strip().splitlines()) == 1
    )
    assert runner.invoke(app, ["trace", out["trace_id"], "--tenant", "acme"]).exit_code == 0


def failing_votes(monkeypatch) -> dict:
    """A vote run where every call fails for good: five dead letters."""
    model_ctx, _ = scripted(lambda p, t, i: _error(400))
    return run_json(model_ctx, "What is 6 * 7?", "--mode", "vote", "--votes", "5")


def test_escalated_branches_become_dead_letters_with_input_and_error(monkeypatch):
    out = failing_votes(monkeypatch)
    assert out["status"] == "failed"
    listed = runner.invoke(app, ["dlq", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    letters = json.loads(listed.output)
    assert sorted(d["id"] for d in letters) == sorted(out["failed_branches"])
    assert all(
        d["trace_id"] == out["trace_id"] and "BadRequestError" in d["error"] for d in letters
    )
    shown = json.loads(runner.invoke(app, ["dlq", "show", letters[0]["id"], "--json"]).output)
    assert shown["input"]["text"] == "What is 6 * 7?" and shown["input"]["kind"] == "vote"
    assert shown["status"] == "open" and shown["retries"] == []
    assert (
        json.loads(runner.invoke(app, ["dlq", "list", "--json", "--tenant", "other"]).output) == []
    )


def test_retry_resolves_a_dead_letter_once(monkeypatch):
    out = failing_votes(monkeypatch)
    first = out["failed_branches"][0]
    model_ctx, calls = scripted(lambda p, t, i: answer("42"))
    retried = runner.invoke(app, ["dlq", "retry", first, "--json"], obj=model_ctx)
    assert retried.exit_code == 0, retried.output
    letter = json.loads(retried.output)
    assert letter["status"] == "resolved" and letter["result"]["vote"] == "42" and len(calls) == 1
    assert "What is 6 * 7?" in calls[0][0]
    assert [r["status"] for r in letter["retries"]] == ["ok"] and replayed(
        letter["retries"][0]["transitions"]
    ) == "COMPLETED"
    again = runner.invoke(app, ["dlq", "retry", first], obj=model_ctx)
    assert again.exit_code == 2 and "already resolved" in again.output and len(calls) == 1
    open_ids = [d["id"] for d in json.loads(runner.invoke(app, ["dlq", "list", "--json"]).output)]
    assert first not in open_ids and len(open_ids) == 4
    assert len(json.loads(runner.invoke(app, ["dlq", "list", "--all", "--json"]).output)) == 5


def test_a_retry_that_fails_again_exits_1_and_keeps_the_letter_open(monkeypatch):
    out = failing_votes(monkeypatch)
    still_failing, _ = scripted(lambda p, t, i: _error(400))
    result = runner.invoke(
        app, ["dlq", "retry", out["failed_branches"][0], "--json"], obj=still_failing
    )
    assert result.exit_code == 1
    letter = json.loads(result.output)
    assert (
        letter["status"] == "open"
        and len(letter["retries"]) == 1
        and "BadRequestError" in letter["error"]
    )


def test_unknown_dead_letter_is_one_line_exit_2(monkeypatch):
    failing_votes(monkeypatch)
    for args in (["dlq", "show", "vote-nope"], ["dlq", "retry", "vote-nope"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "no dead letter" in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_two_retries_of_one_letter_at_once_call_the_model_once(monkeypatch):
    out = failing_votes(monkeypatch)
    branch = out["failed_branches"][0]
    model_ctx, calls = scripted(lambda p, t, i: (0.3, answer("42")))
    outcomes: list = []
    start = threading.Barrier(2)

    def one_retry():
        async def main():
            async with open_sqlite_store() as store:
                start.wait()
                try:
                    outcomes.append(
                        (await retry_letter(TraceStore(store), branch, model_ctx))["status"]
                    )
                except StoreError as exc:
                    outcomes.append(str(exc))

        asyncio.run(main())

    threads = [threading.Thread(target=one_retry) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(o if o == "resolved" else "refused" for o in outcomes) == ["refused", "resolved"]
    assert any("already resolved" in o for o in outcomes)
