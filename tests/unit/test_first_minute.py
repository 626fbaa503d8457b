"""What a new user sees in their first minute (issue 30): a `needs_review` answer labelled as the
leading guess with its support, a judge row and reason that agree, one `error:` prefix (click's own
usage errors included), and an empty table that says what to do next instead of drawing an empty
frame."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.cli.model_notice import NOTICE
from parallax.cli.run import leading_guess
from testkit.scripted_model import scripted

runner = CliRunner()
TEMPS = [0.3, 0.475, 0.65, 0.825, 1.0]


def answer(value: str) -> str:
    return json.dumps({"reasoning": "I counted.", "answer": value})


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["serve", "--port", "0"],
            "error: Invalid value for '--port'",
        ),  # a click check (min=1) printed `Error:`
        (["playbook", "show", "--bogus"], "error: No such option: --bogus"),
        (["nosuch"], "error: No such command 'nosuch'"),
        (["run", "hi", "--votes", "many"], "error: Invalid value for '--votes'"),
    ],
)
def test_clicks_own_usage_errors_have_the_one_error_prefix(args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output and "Error:" not in result.output
    assert result.output.strip().splitlines()[-1].startswith("error: ")
    assert (
        "Try '" in result.output and "--help' for help." in result.output
    )  # click's usage hint is kept


def test_an_empty_playbook_says_how_to_fill_it_instead_of_drawing_an_empty_table(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, ["playbook", "show"])
    assert result.exit_code == 0, result.output
    assert (
        result.output.strip()
        == "playbook default v0 (0 active items): no active lessons yet; learn some from "
        "tasks with a known answer: parallax learn TASKS.jsonl --playbook default "
        "(docs/learning.md)"
    )
    assert "section" not in result.output  # no header of an empty table


def test_the_model_notice_names_both_options_a_real_endpoint_needs():
    assert "--base-url URL --model NAME" in NOTICE and len(NOTICE) <= 80


def test_a_needs_review_answer_is_the_leading_guess_with_its_support():
    result = {
        "status": "needs_review",
        "answer": "22 sheep",
        "vote_counts": {"22": 2, "17": 1, "5": 1, "12": 1},
        "reason": "no answer reached 3 of 5 votes",
    }
    assert (
        leading_guess(result)
        == "leading guess (2 of 5 votes): 22 sheep — needs review: no answer reached 3 of 5 votes"
    )
    assert (
        leading_guess({"status": "needs_review", "answer": "x", "reason": ""})
        == "leading guess: x — needs review"
    )


def test_the_first_command_ends_with_the_leading_guess_and_the_judges_row_agrees_with_the_reason(
    tmp_path, monkeypatch
):
    """Five votes split 2-1-1-1 and a judge whose reply is none of the candidates: the reason quotes
    its reply (the row shows the same), `votes asked` says why it stopped once, and the last line is
    a labelled guess.
    """
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    votes = dict(zip(TEMPS, ["22", "22", "17", "5", "12"], strict=True))

    def script(prompt, t, i):
        if "Candidate answers" in prompt:
            return json.dumps({"choice": "1", "reason": "17"})
        return answer(votes.get(round(t, 3), "0"))

    model_ctx, _ = scripted(script)
    result = runner.invoke(
        app,
        [
            "run",
            "A farmer has 17 sheep and buys 5 more. How many sheep does he have?",
            "--mode",
            "vote",
            "--votes",
            "5",
        ],
        obj=model_ctx,
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    asked = next(line for line in lines if line.startswith("votes asked:"))
    assert (
        asked == "votes asked: 5 (all of them: early stopping off)"
    )  # was "5 (asked all 5 votes (...))"
    last = " ".join(result.stdout.split("playbook v0", 1)[1].split())  # the last line, unwrapped
    assert (
        last
        == "leading guess (2 of 5 votes): 22 — needs review: no answer reached 3 of 5 votes; the"
        " judge did not pick a candidate: it replied '1', which is none of them"
    )
    assert '"choice": "1"' in result.stdout  # the judge's row shows that same reply
    status = next(line for line in lines if line.startswith("needs_review"))
    assert "judge" not in status  # the reason is said once, on the last line
