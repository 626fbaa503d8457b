"""The server is installed from constraints/server.txt (docs/deploy.md, .ci/run): every requirement
of the dependencies and the `server` and `test` extras (with the extras they name) is pinned there,
at a version pyproject.toml's range admits. A floor raised in pyproject.toml without
`constraints/refresh` fails here, not at the install.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
SERVER_PYTHON = {
    "python_version": "3.12",
    "python_full_version": "3.12.1",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def pins(text: str) -> dict[str, Version]:
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints/server.txt pins exact versions only: {line!r}"
            found[canonicalize_name(name)] = Version(version)
    return found


def requirements(pyproject: dict, extras: tuple[str, ...]) -> list[Requirement]:
    """The project's dependencies and those of `extras`, following the extras they name of the
    project itself."""
    project = pyproject["project"]
    wanted, seen, found = (
        list(extras),
        set(),
        [Requirement(line) for line in project["dependencies"]],
    )
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in project["optional-dependencies"][extra]:
            requirement = Requirement(line)
            if requirement.name == project["name"]:
                wanted += sorted(requirement.extras)
            else:
                found.append(requirement)
    return [
        r for r in found if r.marker is None or r.marker.evaluate({**SERVER_PYTHON, "extra": ""})
    ]


def out_of_range(pyproject: dict, constraints: str) -> list[str]:
    """The requirements of the server and test extras that constraints/server.txt leaves out or pins
    outside their range."""
    pinned = pins(constraints)
    wrong = []
    for requirement in requirements(pyproject, ("server", "test")):
        version = pinned.get(canonicalize_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            wrong.append(f"{requirement} (constraints/server.txt: {version or 'not pinned'})")
    return wrong


def test_every_server_requirement_is_pinned_inside_its_range():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    constraints = (ROOT / "constraints" / "server.txt").read_text()
    assert not (wrong := out_of_range(pyproject, constraints)), (
        "run constraints/refresh: " + "; ".join(wrong)
    )
    assert {"pip", "aegra-api", "starlette", "lxml"} <= set(
        pins(constraints)
    )  # the whole environment, pip included


def test_a_floor_raised_without_refreshing_the_constraints_is_caught():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    constraints = (ROOT / "constraints" / "server.txt").read_text()
    dependencies = pyproject["project"]["dependencies"]
    dependencies[next(i for i, line in enumerate(dependencies) if line.startswith("pypdf"))] = (
        "pypdf[crypto]>=99"
    )
    assert out_of_range(pyproject, constraints) == [
        f"pypdf[crypto]>=99 (constraints/server.txt: {pins(constraints)['pypdf']})"
    ]
    pyproject["project"]["optional-dependencies"]["server"].append("brand-new-dependency>=1")
    assert "brand-new-dependency>=1 (constraints/server.txt: not pinned)" in out_of_range(
        pyproject, constraints
    )
