"""docs/architecture.md's map names every module of the installed package, each on a line of its
own, and names nothing that is not there: a module added, moved or removed without its line fails
here."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "architecture.md"
ROOMS = ("parallax", "graphs", "nodes", "state", "prompts")
"""The folders that install as `parallax` (pyproject's package-dir: graphs/ is parallax.graphs,
...)."""
LINE = re.compile(r"^- `([^`]+\.py)`: (\S.*)$", re.MULTILINE)


def modules() -> set[str]:
    """Every module under the rooms, as a repository path; parallax/'s symlinks to the other rooms
    are not followed (os.walk does not), so each module counts once, under its own folder."""
    found = set()
    for room in ROOMS:
        for folder, subfolders, files in os.walk(ROOT / room):
            subfolders[:] = [name for name in subfolders if name != "__pycache__"]
            found |= {
                (Path(folder) / name).relative_to(ROOT).as_posix()
                for name in files
                if name.endswith(".py")
            }
    return found


def mapped() -> list[str]:
    return LINE.findall(MAP.read_text(encoding="utf-8"))


def test_every_module_has_its_line_in_the_map():
    missing = sorted(modules() - {path for path, _ in mapped()})
    assert missing == [], (
        f"docs/architecture.md's map lacks a line (- `path`: what it holds) for: {missing}"
    )


def test_the_map_names_only_modules_that_exist_each_once():
    paths = [path for path, _ in mapped()]
    assert sorted(set(paths) - modules()) == [], "the map names modules that do not exist"
    assert sorted(p for p in set(paths) if paths.count(p) > 1) == [], "the map names a module twice"


def test_the_map_walks_the_whole_package():
    """The walk itself can fail: it must find the package's modules in every room, and the map must
    be long."""
    found = modules()
    assert {
        "parallax/server/app.py",
        "parallax/runtime/storage/trace_store.py",
        "graphs/solve.py",
        "nodes/route.py",
        "state/context.py",
        "prompts/templates.py",
        "parallax/cli/run.py",
        "parallax/logic/vote.py",
    } <= found
    assert not any(
        path.startswith(
            ("parallax/graphs/", "parallax/nodes/", "parallax/state/", "parallax/prompts/")
        )
        for path in found
    )
    assert len(mapped()) == len(found) > 200
