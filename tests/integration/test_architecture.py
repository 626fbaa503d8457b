"""The floors only point down and nothing imports in a circle: import-linter's contracts
(pyproject.toml) hold, and they catch a bad arrow.

Plain `lint-imports` works in a checkout: parallax/graphs, nodes, prompts and state are symlinks
to the top-level folders that pyproject's `package-dir` installs under those names, so
import-linter, which reads a package from its directory, sees the layout as installed.
The bad-arrow tests write their import into a copy (symlinks followed), never the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lint(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """`lint-imports` with pyproject's contracts, in a fresh process run from `cwd`."""
    env = {**os.environ, **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    return subprocess.run(
        [Path(sys.executable).with_name("lint-imports"), ROOT / "pyproject.toml", "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_with(tmp_path: Path, module: str, line: str) -> Path:
    """The parallax package copied to `tmp_path` (as installed), with `line` added to `module` (a
    path in it)."""
    shutil.copytree(
        ROOT / "parallax", tmp_path / "parallax", ignore=shutil.ignore_patterns("__pycache__")
    )
    target = tmp_path / "parallax" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    return tmp_path


def test_every_contract_is_kept_in_the_checkout():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def test_an_arrow_pointing_up_breaks_the_floors(tmp_path):
    layout = copy_with(
        tmp_path,
        "state/payloads.py",
        "from parallax.runtime import settings  # deliberate: state reaching up",
    )
    result = lint(layout, pythonpath=layout)
    assert result.returncode == 1
    assert "Floors only point down" in result.stdout and "BROKEN" in result.stdout
    assert "parallax.state.payloads -> parallax.runtime.settings" in result.stdout


def test_a_node_importing_another_node_is_refused(tmp_path):
    layout = copy_with(
        tmp_path, "nodes/judge.py", "from parallax.nodes.merge import merge  # deliberate"
    )
    result = lint(layout, pythonpath=layout)
    assert result.returncode == 1 and "nodes do not import each other" in result.stdout


def test_a_circle_breaks_the_no_circles_contract_even_through_a_function_level_import(tmp_path):
    # structured_call imports circuit_breaker; an import back, even one deferred into a function, is
    # a circle
    layout = copy_with(
        tmp_path,
        "runtime/circuit_breaker.py",
        "def _late():\n    from parallax.runtime.structured_call import ask  # deliberate: a"
        " circle",
    )
    result = lint(layout, pythonpath=layout)
    assert (
        result.returncode == 1 and "Floors only point down: entry points > graphs" in result.stdout
    )
    assert (
        "No import circles" in result.stdout
        and "BROKEN" in result.stdout
        and "3 kept, 1 broken" in result.stdout
    )
    assert "No cycles are allowed in parallax.runtime." in result.stdout
    assert ".circuit_breaker -> .structured_call" in result.stdout
