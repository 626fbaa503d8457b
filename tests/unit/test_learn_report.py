"""What `parallax learn` says: plain lines from its first second when stderr is no terminal, and one
closing sentence that says what was learned, or why nothing was and what to change
(cli/learn_report.py)."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from parallax.cli import app
from parallax.cli.learn_report import summary
from testkit.scripted_model import scripted
from tests.unit.test_cli_learn import write_tasks
from tests.unit.test_learn_graph import bag_of_words, learning_script

runner = CliRunner()


def test_without_a_terminal_each_step_is_a_plain_line_from_the_start(tmp_path):
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    train, val = (
        write_tasks(tmp_path / "train.jsonl", 4),
        write_tasks(tmp_path / "val.jsonl", 3, target="3.0"),
    )
    result = runner.invoke(
        app,
        ["learn", str(train), "--val", str(val), "--batch", "2", "--playbook", "fin"],
        obj=model_ctx,
    )
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert (
        lines[0]
        == "   0s  learning playbook fin from 4 tasks in batches of 2; the gate measures it on 3"
        " validation tasks before the first batch and after each"
    )  # before the first model call
    assert all(re.match(r"^ +\d+s  +\S", line) for line in lines[:-1]), (
        lines
    )  # no bar, no colour: seconds, then words
    assert "\x1b[" not in result.stderr
    body = [line.split("s  ", 1)[1] for line in lines[:-1]]
    assert body[1:6] == [
        "measuring playbook v0 on 3 validation tasks (the gate's baseline)",
        "  validation 1/3: wrong",
        "  validation 2/3: wrong",
        "  validation 3/3: wrong",
        "batch 1/2: solving, reflecting on and curating 2 tasks",
    ]
    assert (
        body.count("  task 1/2: right, 1 lesson") == 2
        and body.count("  validation 3/3: wrong") == 3
    )
    assert body[-1].startswith("batch 2/2: not accepted: a tie without signal")
    assert re.fullmatch(
        r"Nothing learned in [\d.]+ s: the gate kept the old playbook \(a tie without signal:"
        r" validation "
        r"accuracy was 0\.0 before and after: a person must approve it \(--approve\)\)"
        r" \(validation "
        r"accuracy 0\.00 -> 0\.00\); more validation tasks \(--val-size\) let the gate see a gain; "
        r"--approve lets you decide\.",
        lines[-1],
    ), lines[-1]


def test_json_stays_one_object_and_says_nothing_else(tmp_path):
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    train = write_tasks(tmp_path / "train.jsonl", 2)
    result = runner.invoke(app, ["learn", str(train), "--batch", "2", "--json"], obj=model_ctx)
    assert result.exit_code == 0 and result.stderr == "" and json.loads(result.stdout)["batches"]


BATCH = {
    "batch": 0,
    "reflections": 8,
    "operations": 0,
    "items_added": 0,
    "accepted": False,
    "reason": "no operations",
}


def test_a_run_cut_at_the_token_limit_names_the_setting_to_raise():
    said = summary(
        {
            "playbook": "formula",
            "from_version": 0,
            "to_version": 0,
            "accepted": False,
            "val_accuracy_before": 0.0,
            "val_accuracy_after": 0.0,
            "batches": [BATCH],
            "failures": {"length": 5, "timeout": 1},
            "seconds": 95.2,
        },
        max_tokens=384,
        embedded=True,
    )
    assert (
        said == "Nothing learned in 95.2 s: none of the 8 reflections gave a lesson that passed the"
        " checks (validation accuracy 0.00 -> 0.00); 5 of 8 replies stopped at the 384-token"
        " limit: raise PARALLAX_MAX_TOKENS (e.g. PARALLAX_MAX_TOKENS=768); 1 of 8 tasks failed"
        " (1 timed out); the embedded SmolLM2-135M rarely writes a lesson that helps: point"
        " learn at a real model with --base-url URL --model NAME."
    )


def test_what_was_learned_is_said_with_where_to_read_it():
    said = summary(
        {
            "playbook": "formula",
            "from_version": 0,
            "to_version": 2,
            "accepted": True,
            "val_accuracy_before": 0.25,
            "val_accuracy_after": 0.5,
            "seconds": 40.0,
            "batches": [
                {**BATCH, "operations": 3, "items_added": 3, "accepted": True},
                {**BATCH, "batch": 1, "operations": 1, "items_added": 1, "accepted": True},
            ],
        },
        max_tokens=384,
        embedded=False,
    )
    assert (
        said
        == "Learned 4 lessons in 40.0 s: playbook formula v0 -> v2, validation accuracy 0.25 ->"
        " 0.50; see them with `parallax playbook show --playbook formula`."
    )
