"""The floors only point down: import-linter's contracts (pyproject.toml) hold, and they catch a bad arrow.

import-linter reads a package from its directory, and the repository keeps graphs/, nodes/,
prompts/ and state/ beside parallax/ (pyproject's `package-dir` maps them in). So each test
lays the code out as it is installed, in a temporary folder, and runs `lint-imports` on it in
a fresh process (tests/support/import_floors.py, which is also the command to run by hand).
"""

from __future__ import annotations

from tests.support.import_floors import installed_layout, lint


def test_every_contract_is_kept(tmp_path):
    result = lint(installed_layout(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_an_arrow_pointing_up_breaks_the_floors(tmp_path):
    layout = installed_layout(tmp_path)
    payloads = layout / "parallax" / "state" / "payloads.py"
    payloads.write_text(payloads.read_text() + "\nfrom parallax.runtime import settings  # deliberate: state reaching up\n")
    result = lint(layout)
    assert result.returncode == 1
    assert "Floors only point down" in result.stdout and "BROKEN" in result.stdout
    assert "parallax.state.payloads -> parallax.runtime.settings" in result.stdout


def test_a_node_importing_another_node_is_refused(tmp_path):
    layout = installed_layout(tmp_path)
    judge = layout / "parallax" / "nodes" / "judge.py"
    judge.write_text(judge.read_text() + "\nfrom parallax.nodes.merge import merge  # deliberate\n")
    result = lint(layout)
    assert result.returncode == 1 and "nodes do not import each other" in result.stdout
