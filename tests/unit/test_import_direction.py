"""Imports between the repository's top-level folders point one way: tests -> bench -> testkit.

bench/ and testkit/ are not installed and sit beside tests/; a bench that imported a test, or a test
double that imported a bench, would tie the three into a circle. import-linter does not hold this:
tests/unit and tests/integration are namespace packages it does not see, so an import of
`tests.unit.x` would pass unnoticed. Here each module is read with ast: imports at the top and
inside functions, and module names in strings (`python -m ...`, importlib).
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"bench": ("tests",), "testkit": ("tests", "bench")}
"""Each folder, with the top-level packages its modules may not import."""
MODULE_NAME = re.compile(r"[a-z_]+(\.[a-z_0-9]+)+")


def imported(path: Path) -> Iterator[tuple[int, str]]:
    """The modules `path` imports or names in a string, each with its line."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if MODULE_NAME.fullmatch(node.value):
                yield node.lineno, node.value


def wrong_way(root: Path) -> list[tuple[str, int, str]]:
    """Every import under `root` that points against the direction: path, line and module."""
    found = []
    for folder, forbidden in FORBIDDEN.items():
        for path in sorted((root / folder).rglob("*.py")):
            found += [
                (path.relative_to(root).as_posix(), line, module)
                for line, module in imported(path)
                if module.split(".")[0] in forbidden
            ]
    return found


def append(path: Path, text: str) -> None:
    with path.open("a") as module:
        module.write(text)


def test_bench_imports_no_test_and_testkit_neither_a_test_nor_a_bench():
    assert wrong_way(ROOT) == []


def test_the_allowed_direction_is_seen():
    # bench imports testkit: the reader finds imports, so the empty list above means something
    modules = {module for path in (ROOT / "bench").rglob("*.py") for _, module in imported(path)}
    assert "testkit.fault_server" in modules and "parallax.runtime.settings" in modules


def test_a_deliberate_wrong_way_import_is_caught(tmp_path):
    for folder in FORBIDDEN:
        shutil.copytree(
            ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    append(
        tmp_path / "bench" / "chaos.py",
        "\nfrom tests.unit.test_bench import x  # deliberate: a bench reaching into a test\n",
    )
    append(
        tmp_path / "testkit" / "processes.py",
        "\n\ndef late():\n    from bench import chaos  # deliberate, inside a function\n",
    )
    append(
        tmp_path / "testkit" / "word_counts.py",
        '\nMODULE = "tests.conftest"  # deliberate: a module for `python -m`\n',
    )
    found = wrong_way(tmp_path)
    assert [(path, module) for path, _, module in found] == [
        ("bench/chaos.py", "tests.unit.test_bench"),
        ("testkit/processes.py", "bench"),
        ("testkit/word_counts.py", "tests.conftest"),
    ], found
