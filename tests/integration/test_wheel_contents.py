"""The package installs as built: the wheel holds every module and data file of the source tree,
nothing else.

Why: pyproject once listed the packages by hand and missed parallax.runtime.model_server; an
editable install (what CI used) never noticed, and every installed wheel failed at its first run.
Here the sdist and the wheel are built the way `python -m build` builds them (the wheel from the
unpacked sdist, which keeps no symlinks) from a copy of the checkout, and the wheel's files are
compared with the source tree's: what setup.py finds, package-dir maps and package-data adds. The
wheel and the sdist must not carry data samples either (FinanceBench is CC BY-NC:
THIRD_PARTY_NOTICES.md). .ci/run installs the wheel in fresh venvs and runs it
(.ci/installed_smoke.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "node_modules",
    ".next",
    ".parallax*",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    ".mypy_cache",
    ".pytest_cache",
    ".hypothesis",
    ".langgraph_api",
    "filings",
    "main-job.json",
)
DATA_SUFFIXES = (".jsonl", ".csv", ".pdf", ".docx", ".html", ".gz", ".parquet", ".txt", ".md")
"""Files a data sample would be; the package itself has none (its data files are JSON configs and
py.typed)."""


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The sdist and the wheel of a copy of the checkout, built as `python -m build` does, without
    isolation."""
    work = tmp_path_factory.mktemp("build")
    shutil.copytree(ROOT, work / "src", symlinks=True, ignore=LEFT_OUT)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            "--outdir",
            str(work / "dist"),
            str(work / "src"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found = {path.suffix: path for path in (work / "dist").iterdir()}
    return {"wheel": found[".whl"], "sdist": found[".gz"], "src": work / "src"}


def source_files(src: Path) -> set[str]:
    """The files the package is made of, as installed: parallax/ with graphs, nodes, prompts and
    state mapped in (the checkout's symlinks followed), caches left out."""
    files = set()
    for folder, dirs, names in os.walk(src / "parallax", followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        files |= {
            (Path(folder) / name).relative_to(src).as_posix()
            for name in names
            if not name.endswith(".pyc")
        }
    return files


def test_the_wheel_holds_every_file_of_the_source_tree_and_nothing_else(dist):
    wheel = set(zipfile.ZipFile(dist["wheel"]).namelist())
    installed = {name for name in wheel if name.startswith("parallax/")}
    source = source_files(dist["src"])
    missing, extra = sorted(source - installed), sorted(installed - source)
    modules = sum(name.endswith(".py") for name in source)
    print(
        f"source tree: {len(source)} files ({modules} modules); wheel: {len(installed)}; "
        f"missing from the wheel: {missing or 'none'}; only in the wheel: {extra or 'none'}"
    )
    assert not missing and not extra
    assert {
        "parallax/runtime/model_server/__init__.py",
        "parallax/graphs/solve.py",
        "parallax/state/context.py",
        "parallax/server/aegra.json",
        "parallax/py.typed",
    } <= installed
    others = {name.split("/")[0] for name in wheel} - {"parallax"}
    assert others == {"parallax_graph-0.1.0.dist-info"}, others


def test_neither_the_wheel_nor_the_sdist_carries_a_data_sample(dist):
    wheel = zipfile.ZipFile(dist["wheel"]).namelist()
    data = [name for name in wheel if name.startswith("parallax/") and name.endswith(DATA_SUFFIXES)]
    assert data == [], data
    with tarfile.open(dist["sdist"]) as sdist:
        names = [name.split("/", 1)[1] for name in sdist.getnames() if "/" in name]
    not_shipped = ("tests", "testkit", "bench", "examples", "docs")
    assert not [name for name in names if name.split("/")[0] in not_shipped]
    assert not [
        name
        for name in names
        if "financebench" in name.lower() or name.endswith((".jsonl", ".csv", ".pdf", ".gz"))
    ]
    assert {
        "pyproject.toml",
        "setup.py",
        "README.md",
        "LICENSE",
        "THIRD_PARTY_NOTICES.md",
        "graphs/solve.py",
        "parallax/server/aegra.json",
    } <= set(names)


def test_the_metadata_names_the_licence_the_pythons_and_the_command(dist):
    archive = zipfile.ZipFile(dist["wheel"])
    meta = Parser().parsestr(archive.read("parallax_graph-0.1.0.dist-info/METADATA").decode())
    assert meta["License-Expression"] == "MIT" and meta["Requires-Python"] == ">=3.11"
    assert sorted(meta.get_all("License-File")) == ["LICENSE", "THIRD_PARTY_NOTICES.md"]
    assert {f"Programming Language :: Python :: 3.{minor}" for minor in (11, 12, 13)} <= set(
        meta.get_all("Classifier")
    )
    assert (
        "parallax = parallax.cli:app"
        in archive.read("parallax_graph-0.1.0.dist-info/entry_points.txt").decode()
    )
    assert "MIT License" in archive.read("parallax_graph-0.1.0.dist-info/licenses/LICENSE").decode()


def test_twine_accepts_both(dist):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            str(dist["wheel"]),
            str(dist["sdist"]),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout.count("PASSED") == 2, (
        result.stdout + result.stderr
    )
