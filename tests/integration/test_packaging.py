"""What `pip install .` puts into site-packages: one name, `parallax`, and no tests or
benchmarks."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_installs_one_top_level_name(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    wheel = next(tmp_path.glob("parallax_graph-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = "-".join(wheel.name.split("-")[:2]) + ".dist-info"
    assert {n.split("/")[0] for n in names} == {"parallax", dist_info}
    for module in (
        "graphs/solve.py",
        "graphs/learn.py",
        "nodes/route.py",
        "prompts/solve.py",
        "state/context.py",
        "runtime/retry.py",
        "logic/merge_operations/__init__.py",
        "cli/__init__.py",
    ):
        assert f"parallax/{module}" in names, module
    assert not [
        n
        for n in names
        if "/tests/" in n or "/bench/" in n or "fault_server" in n or "sleeping_model" in n
    ]
