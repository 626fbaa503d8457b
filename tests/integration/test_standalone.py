"""The repository stands alone: no file in it reaches for data beside the checkout.

Why: the team's data sits in a folder next to the repository on the machines it was written on, and
code that read from that sibling folder passed there and failed in every user's clone (five tests
failed, one skipped). What a test, benchmark or example reads is kept in the repository
(bench/data/samples/, examples/, tests/data/), each sample with its source and licence; this test
fails on any file in the repository (committed, or new and not ignored) that names a path out of it
again, and .ci/run runs the suite in a clone with nothing beside it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = "shared"
"""The sibling folder's name, kept apart in the examples below so this file itself names no path
out."""
REACHING_OUT = re.compile(
    r"\.\./+shared\b"  # the sibling folder by a relative path, however many levels up
    r"|/work/(?:shared)\b"  # the absolute path of the team's data folder
    r"|/\s*[\"'](?:shared)[\"']"  # Path(...).parents[2] / "shared"
    r"|[\"'](?:shared)/data\b"  # its data folder as one string, joined to a parent
    r"|os\.path\.join\([^)\n]*[\"'](?:shared)[\"']"
)
SAMPLE_FOLDERS = [
    "bench/data/samples/formula",
    "bench/data/samples/gsm8k",
    "bench/data/samples/qmsum",
    "bench/data/samples/financebench",
    "examples",
]


def repository_files() -> list[Path]:
    """Every file git keeps or would add (tracked, plus untracked files that are not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


@pytest.mark.parametrize(
    "line",
    [
        'DATA = ROOT.parent / "shared" / "data"',
        'FORMULA = Path(__file__).resolve().parents[3] / "shared" / "data" / "formula"',
        f"parallax learn ../{SHARED}/data/formula/train.jsonl",
        f'open("/work/{SHARED}/data/gsm8k/test.jsonl")',
        'os.path.join(here, "..", "shared", "data")',
        f'root / "{SHARED}/data/qmsum/val.jsonl"',
    ],
)
def test_the_check_sees_every_way_a_path_reached_out(line):
    assert REACHING_OUT.search(line)


@pytest.mark.parametrize(
    "line",
    [
        'services.shared("fan-1", asyncio.Event, "limit")',
        'await playbooks.head("shared")',
        "a circuit breaker shared by every branch",
    ],
)
def test_the_word_shared_alone_is_not_a_path(line):
    assert not REACHING_OUT.search(line)


def test_no_file_in_the_repository_reads_beside_it():
    files = repository_files()
    assert len(files) > 100 and ROOT / "README.md" in files  # the listing worked
    found = []
    for path in files:
        if path == Path(__file__).resolve():
            continue  # this file spells the forms out, to test the check
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary file (a PDF, a gzipped sample) names no path to read
        found += [
            f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for n, line in enumerate(text.splitlines(), 1)
            if REACHING_OUT.search(line)
        ]
    assert not found, (
        "files reach outside the repository (copy the data in, with a README saying where it is"
        " from):\n" + "\n".join(found)
    )


@pytest.mark.parametrize("folder", SAMPLE_FOLDERS)
def test_every_data_sample_says_where_it_comes_from_and_under_which_licence(folder):
    note = (ROOT / folder / "README.md").read_text()
    for needed in ("Source", "Licence", "Selected", "Copied on"):
        assert needed in note, f"{folder}/README.md does not say {needed!r}"
