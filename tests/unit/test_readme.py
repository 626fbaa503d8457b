"""The README's promises that code can check: the graph drawing and the CLI it documents."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.solve import graph

README = (Path(__file__).parents[2] / "README.md").read_text()


def test_readme_draws_the_solve_graph_as_the_code_does():
    drawn = re.search(r"```mermaid\n(.*?)```", README, re.S).group(1)
    assert drawn == graph.get_graph().draw_mermaid()


def test_readme_has_exactly_two_setup_commands_and_they_use_the_cli():
    setup = README.split("## Set up", 1)[1].split("## Examples", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", setup, re.S)
    assert len(commands) == 2
    assert "parallax run" in commands[0] and "pytest" in commands[1]


def test_every_documented_run_flag_exists():
    help_text = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    for flag in set(re.findall(r"parallax run [^\n]*", README)):
        for option in re.findall(r"--[a-z-]+", flag):
            assert option in help_text, option
