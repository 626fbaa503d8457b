"""import-linter on the code as it is installed: `python -m tests.support.import_floors`.

Why not plain `lint-imports` in the checkout: import-linter reads a package from its directory,
and the repository keeps graphs/, nodes/, prompts/ and state/ beside parallax/ (pyproject's
`package-dir` maps them in as parallax.graphs and so on), so in a checkout it reports
"Missing layer 'parallax.graphs'". This lays the packages out as `pip install .` does, in a
temporary folder, and runs `lint-imports` there with the contracts of pyproject.toml.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "pyproject.toml"


def installed_layout(target: Path) -> Path:
    """Copy every package to where `pip install .` puts it (from pyproject's package-dir)."""
    package_dir = tomllib.loads(CONFIG.read_text())["tool"]["setuptools"]["package-dir"]
    for name, folder in sorted(package_dir.items()):  # "parallax" first, then its mapped subpackages
        shutil.copytree(ROOT / folder, target / name.replace(".", "/"), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return target


def lint(layout: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on `layout`, in a fresh process that imports the packages from there."""
    env = {**os.environ, "PYTHONPATH": str(layout)}
    return subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
                           str(CONFIG), "--no-cache"],
                          cwd=layout, env=env, capture_output=True, text=True, timeout=120)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="parallax-floors-") as tmp:
        result = lint(installed_layout(Path(tmp)))
    print(result.stdout + result.stderr, end="")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
