"""`--help` reads like other tools': no value placeholder after a flag, examples at the end of run,
learn and serve."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from parallax.cli import app
from parallax.cli.examples import EXAMPLES

runner = CliRunner()


def every_command(command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    if hasattr(command, "commands"):  # a group (typer's own click, not the click package)
        for name, sub in command.commands.items():
            found += every_command(sub, (*path, name))
    return found


COMMANDS = every_command(typer.main.get_command(app))


def help_of(path: tuple[str, ...], columns: int = 80) -> str:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


def test_the_walk_finds_the_commands():
    assert {
        ("run",),
        ("learn",),
        ("serve",),
        ("playbook", "show"),
        ("dlq", "list"),
        ("prompts", "canary"),
    } <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "parallax")
def test_flags_show_no_value_placeholder(path):
    text = help_of(path)
    assert "<bool>" not in text
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    flags = [
        p
        for p in command.get_params(
            command.make_context("parallax", ["--help"], resilient_parsing=True)
        )
        if getattr(p, "is_flag", False)
    ]
    for flag in flags:
        line = next(line for line in text.splitlines() if line.strip().startswith(flag.opts[0]))
        assert line.strip().split()[1][0] != "<", line  # the help text follows the flag, no <type>


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "parallax")
def test_help_fits_80_columns(path):
    assert max(len(line) for line in help_of(path).splitlines()) <= 80


@pytest.mark.parametrize("name", ["run", "learn", "serve", "feedback"])
def test_help_ends_with_examples(name):
    tail = help_of((name,)).rstrip().split("Examples:")[-1]
    shown = [line.strip() for line in tail.strip().splitlines()]
    assert 2 <= sum(line.startswith("parallax ") for line in shown) <= 3
    assert shown == list(EXAMPLES[name])
