"""`parallax serve` checks the installed Aegra and LangGraph against the ranges pyproject.toml's
`server` extra gives them (runtime/served_versions.py), the ranges the patches of
server/aegra_patches.py were tested with.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from parallax.runtime import served_versions

ROOT = Path(__file__).resolve().parents[2]


def test_the_tested_ranges_are_pyprojects_server_extra_as_installed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    written = {name: SpecifierSet() for name in served_versions.CHECKED}
    for line in [*project["dependencies"], *project["optional-dependencies"]["server"]]:
        requirement = Requirement(line)
        if requirement.name in written:
            written[requirement.name] &= requirement.specifier
    assert served_versions.tested_ranges() == written  # stale metadata: pip install -e . again
    assert written["aegra-api"] == SpecifierSet(">=0.11,<0.12") and "<1.3" in str(
        written["langgraph"]
    )


def test_a_version_outside_its_range_or_a_missing_package_is_named_with_the_range():
    assert served_versions.untested({"aegra-api": "0.11.0", "langgraph": "1.2.24"}) == []
    assert served_versions.untested({"aegra-api": "0.12.0", "langgraph": "1.2.24"}) == [
        "aegra-api 0.12.0 (tested: >=0.11,<0.12)"
    ]
    assert served_versions.untested({"aegra-api": "0.11.0", "langgraph": "1.3.0"}) == [
        "langgraph 1.3.0 (tested: >=1.2.20,<1.3)"
    ]
    assert served_versions.untested({"aegra-api": None, "langgraph": "1.2.24"}) == [
        "aegra-api is not installed"
    ]
    refusal = served_versions.refusal(["aegra-api 0.12.0 (tested: >=0.11,<0.12)"])
    assert (
        "\n" not in refusal
        and "--allow-untested-aegra" in refusal
        and "constraints/server.txt" in refusal
    )
