"""Every `parallax ...` command shown in the README, in docs/ and in `--help` examples parses: its
command exists (its `--help` answers) and each of its options is one that command takes; nothing
runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from parallax.cli import app
from parallax.cli.examples import EXAMPLES

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OPERATORS = {"&&", "||", "|", ";", "&"}
runner = CliRunner()


def shell_lines(text: str) -> list[str]:
    """The lines of the bash blocks (continuations joined) and the inline code spans that run
    `parallax`."""
    found = []
    for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S):
        found += [
            line
            for line in block.replace("\\\n", " ").splitlines()
            if re.search(r"(^|[\s/])parallax ", line)
        ]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    found += [
        span for span in re.findall(r"`([^`\n]+)`", prose) if re.search(r"(^|[\s/])parallax ", span)
    ]
    return found


def commands(line: str) -> list[list[str]]:
    """The argument lists of every `parallax` invocation in a shell line (env assignments, pipes,
    `&` dropped)."""
    tokens = [t.strip("[]") for t in shlex.split(line, comments=True)]
    found, current = [], None
    for token in tokens:
        if token in OPERATORS:
            current = None
        elif current is not None:
            current.append(token)
        elif token == "parallax" or (token.endswith("/bin/parallax") and "=" not in token):
            current = []
            found.append(current)
    return [[t for t in args if t] for args in found]


def documented() -> list[tuple[str, list[str]]]:
    found = [
        (f"--help of {name}", args)
        for name, examples in EXAMPLES.items()
        for e in examples
        for args in commands(e)
    ]
    for page in PAGES:
        found += [
            (f"{page.relative_to(ROOT)}: {line.strip()}", args)
            for line in shell_lines(page.read_text())
            for args in commands(line)
        ]
    return found


DOCUMENTED = documented()
ROOT_COMMAND = typer.main.get_command(app)


def test_the_docs_show_many_commands():
    assert len(DOCUMENTED) > 80
    assert {args[0] for _, args in DOCUMENTED if args} >= {
        "run",
        "learn",
        "eval",
        "trace",
        "playbook",
        "dlq",
        "stats",
        "serve",
        "export",
        "prompts",
        "plan",
        "model",
        "feedback",
    }


@pytest.mark.parametrize("where, args", DOCUMENTED, ids=[w for w, _ in DOCUMENTED])
def test_documented_command_parses(where, args):
    command, path, rest = ROOT_COMMAND, [], list(args)
    while rest and hasattr(command, "commands") and rest[0] in command.commands:
        command = command.commands[rest[0]]
        path.append(rest.pop(0))
    if hasattr(
        command, "commands"
    ):  # a group named on its own (`parallax dlq`), or with an option of its own
        assert all(t.startswith("-") for t in rest), f"unknown command in {where}: {rest}"
    taken = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {
        "--help"
    }
    for token in rest:
        if token.startswith("-") and token != "-":
            assert token.split("=", 1)[0] in taken, (
                f"{where}: `parallax {' '.join(path)}` has no {token}"
            )
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, f"{where}: {result.output}"
