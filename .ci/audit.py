"""pip-audit over the server environment and over pyproject.toml's floors, judged against
.ci/audit-ignore.toml.

    .venv-audit/bin/python .ci/audit.py .venv-server

Run from the tool venv (.ci/run installs pip-audit and bandit there, so their dependencies are not
the server's):
1. pip-audit over every package installed in the server venv (the editable checkout itself left
   out), asking PyPI's vulnerability data for each installed version;
2. pip-audit over pyproject.toml's floors (each `name>=X` of the dependencies and extras, as
   `name==X`): a floor that still admits a version with a known advisory fails here, before anyone
   installs it. A known vulnerability fails the job unless .ci/audit-ignore.toml lists it (by id or
   alias) with a reason and an expiry date that has not passed. A package pip-audit could not audit
   fails it too, unless the ignore file gives an unexpired reason for that (`[[unaudited]]`): an
   audit that did not happen is not a pass.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IGNORE_FILE = ROOT / ".ci" / "audit-ignore.toml"


@dataclass
class Verdict:
    """What one audit found, judged."""

    lines: list[str]
    failed: bool


def floors(pyproject: dict[str, Any]) -> list[str]:
    """`name==X` for every `name>=X` requirement of the project's dependencies and optional
    dependencies."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    project = pyproject["project"]
    found: dict[str, Version] = {}
    for line in [
        *project["dependencies"],
        *(r for extra in project["optional-dependencies"].values() for r in extra),
    ]:
        requirement = Requirement(line)
        if requirement.name == project["name"]:  # the project's own extras
            continue
        for spec in requirement.specifier:
            if spec.operator == ">=":
                found[requirement.name] = max(
                    found.get(requirement.name, Version(spec.version)), Version(spec.version)
                )
    return [f"{name}=={version}" for name, version in sorted(found.items())]


def load_ignores(path: Path = IGNORE_FILE) -> dict[str, Any]:
    return tomllib.loads(path.read_text()) if path.is_file() else {}


def judge(
    report: dict[str, Any], ignores: dict[str, Any], today: datetime.date, what: str
) -> Verdict:
    """The verdict on one pip-audit JSON report (`{"dependencies": [{name, version, vulns |
    skip_reason}]}`)."""
    accepted = {}
    for entry in ignores.get("vulnerability", []):
        accepted[entry["id"]] = entry
    lines, failed, audited, unaudited = [], False, 0, []
    for dependency in report.get("dependencies", []):
        if "skip_reason" in dependency:
            unaudited.append(f"{dependency['name']} ({dependency['skip_reason']})")
            continue
        audited += 1
        for vuln in dependency.get("vulns", []):
            ids = [vuln["id"], *vuln.get("aliases", [])]
            entry = next((accepted[i] for i in ids if i in accepted), None)
            aliases, fixed = (
                ", ".join(vuln.get("aliases", [])) or "-",
                ", ".join(vuln.get("fix_versions", [])) or "-",
            )
            head = (
                f"{dependency['name']} {dependency['version']} {vuln['id']} (aliases {aliases};"
                f" fixed in {fixed})"
            )
            if entry is not None and entry["expires"] >= today:
                lines.append(f"  accepted until {entry['expires']}: {head}: {entry['reason']}")
            else:
                failed = True
                lines.append(
                    f"  FAIL {head}"
                    + (f": its acceptance expired {entry['expires']}" if entry else "")
                )
    if unaudited:
        allowance = next((a for a in ignores.get("unaudited", []) if a["expires"] >= today), None)
        count = f"{len(unaudited)} not audited, e.g. {unaudited[0]}"
        if allowance is None:
            failed = True
            lines.append(f"  FAIL {count}: an audit that did not happen is not a pass")
        else:
            lines.append(f"  {count}: accepted until {allowance['expires']}: {allowance['reason']}")
    vulns = sum(len(d.get("vulns", [])) for d in report.get("dependencies", []))
    lines.insert(
        0,
        f"pip-audit, {what}: {audited} packages audited, {vulns} known vulnerabilities, "
        f"{len(unaudited)} not audited: {'FAIL' if failed else 'ok'}",
    )
    return Verdict(lines, failed)


def pip_audit(*args: str) -> dict[str, Any]:
    """One pip-audit run, its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip_audit",
                "--progress-spinner",
                "off",
                "--format",
                "json",
                "--output",
                str(out),
                *args,
            ],
            capture_output=True,
            text=True,
        )
        if not out.is_file():
            raise SystemExit(
                f"pip-audit failed ({done.returncode}):"
                f" {(done.stderr or done.stdout).strip()[-600:]}"
            )
        report: dict[str, Any] = json.loads(out.read_text())
        return report


def main(server_venv: str) -> int:
    site = sorted(Path(server_venv).glob("lib/python3*/site-packages"))
    if not site:
        raise SystemExit(f"no site-packages under {server_venv}")
    today = datetime.date.today()
    ignores = load_ignores()
    verdicts = [
        judge(
            pip_audit("--path", str(site[0]), "--skip-editable"),
            ignores,
            today,
            f"installed in {server_venv}",
        )
    ]
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "floors.txt"
        requirements.write_text(
            "\n".join(floors(tomllib.loads((ROOT / "pyproject.toml").read_text()))) + "\n"
        )
        verdicts.append(
            judge(
                pip_audit("--requirement", str(requirements), "--no-deps", "--disable-pip"),
                ignores,
                today,
                "pyproject.toml's floors",
            )
        )
    for verdict in verdicts:
        print("\n".join(verdict.lines))
    return 1 if any(verdict.failed for verdict in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
