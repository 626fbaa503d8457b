"""The Aegra and LangGraph versions the server is tested with, checked when `parallax serve` starts.

See docs/internals/process.md#the-tested-aegra-and-langgraph.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

CHECKED = ("aegra-api", "langgraph")
"""The packages whose internals the patches touch (server/aegra_patches.py)."""
EXTRA = "server"


def own_distribution() -> importlib.metadata.Distribution:
    """The installed distribution that holds the `parallax` package (whatever it is named on
    PyPI)."""
    names = importlib.metadata.packages_distributions().get("parallax") or ["parallax"]
    return importlib.metadata.distribution(names[0])


def tested_ranges() -> dict[str, SpecifierSet]:
    """name -> the versions the server extra accepts (its requirement and the main one,
    intersected)."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    ranges = {name: SpecifierSet() for name in CHECKED}
    for line in own_distribution().requires or []:
        requirement = Requirement(line)
        if requirement.name in ranges and (
            requirement.marker is None or requirement.marker.evaluate({"extra": EXTRA})
        ):
            ranges[requirement.name] &= requirement.specifier
    return ranges


def installed_versions() -> dict[str, str | None]:
    """name -> the installed version (None: not installed)."""
    found: dict[str, str | None] = {}
    for name in CHECKED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def untested(versions: Mapping[str, str | None] | None = None) -> list[str]:
    """One phrase per checked package that is missing or outside its tested range (empty: all
    tested); `versions` defaults to the installed ones."""
    ranges, versions = tested_ranges(), installed_versions() if versions is None else versions
    problems = []
    for name in CHECKED:
        version = versions[name]
        if version is None:
            problems.append(f"{name} is not installed")
        elif not ranges[name].contains(version, prereleases=True):
            problems.append(f"{name} {version} (tested: {shown(ranges[name])})")
    return problems


def summary() -> str:
    """The installed versions and the tested ranges, as `parallax serve` prints them at start."""
    ranges, versions = tested_ranges(), installed_versions()
    return (
        ", ".join(f"{name} {versions[name] or 'missing'}" for name in CHECKED)
        + " (tested: "
        + "; ".join(f"{name}{shown(ranges[name])}" for name in CHECKED)
        + ")"
    )


def shown(specifier: SpecifierSet) -> str:
    """A range as people write it, lower bound first: `>=0.11,<0.12`."""
    return ",".join(
        sorted({str(spec) for spec in specifier}, key=lambda text: (not text.startswith(">"), text))
    )


def refusal(problems: list[str]) -> str:
    """The one line that refuses to start on untested versions, and what to do instead."""
    return (
        f"untested {', '.join(problems)}: Parallax changes Aegra internals written for the tested"
        " versions (docs/deploy.md, Aegra patches); install those (pip install -c"
        " constraints/server.txt -e '.[server]') or run anyway with --allow-untested-aegra"
    )
