"""CI's dependency audit (.ci/audit.py) fails on a known vulnerability unless the ignore file
accepts it, with a reason, until a date; an audit that could not look counts as a failure too; the
floors it audits are pyproject's own.
"""

from __future__ import annotations

import datetime
import importlib.util
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ci_audit", ROOT / ".ci" / "audit.py")
assert spec is not None and spec.loader is not None
audit = importlib.util.module_from_spec(spec)
sys.modules["ci_audit"] = audit  # dataclasses look their module up
spec.loader.exec_module(audit)

TODAY = datetime.date(2026, 12, 4)
# pip-audit's JSON report (`pip-audit --format json`), as it writes one
REPORT = {
    "dependencies": [
        {
            "name": "pypdf",
            "version": "5.0.0",
            "vulns": [
                {
                    "id": "PYSEC-2026-3004",
                    "fix_versions": ["6.7.2"],
                    "aliases": ["CVE-2026-27628", "GHSA-xxxx-aaaa-bbbb"],
                    "description": "infinite loop on circular /Prev",
                }
            ],
        },
        {"name": "httpx", "version": "0.29.0", "vulns": []},
    ]
}


def accepting(identifier: str, expires: datetime.date) -> dict:
    return {
        "vulnerability": [
            {
                "id": identifier,
                "package": "pypdf",
                "reason": "only in a test fixture",
                "expires": expires,
            }
        ]
    }


def test_a_known_vulnerability_fails_unless_accepted_by_id_or_alias_until_a_date_not_past():
    refused = audit.judge(REPORT, {}, TODAY, "installed")
    assert refused.failed and "FAIL pypdf 5.0.0 PYSEC-2026-3004" in "\n".join(refused.lines)
    assert "2 packages audited, 1 known vulnerabilities" in refused.lines[0]
    for identifier in ("PYSEC-2026-3004", "CVE-2026-27628"):
        accepted = audit.judge(
            REPORT, accepting(identifier, datetime.date(2027, 1, 1)), TODAY, "installed"
        )
        assert not accepted.failed and "accepted until 2027-01-01" in accepted.lines[1]
    expired = audit.judge(
        REPORT, accepting("CVE-2026-27628", datetime.date(2026, 12, 3)), TODAY, "installed"
    )
    assert expired.failed and "its acceptance expired 2026-12-03" in expired.lines[1]


def test_packages_that_could_not_be_audited_fail_unless_a_dated_reason_says_why():
    blind = {
        "dependencies": [
            {
                "name": "aegra-api",
                "version": "0.11.0",
                "skip_reason": "Dependency not found on PyPI",
            }
        ]
    }
    assert audit.judge(blind, {}, TODAY, "installed").failed
    allowance = {
        "unaudited": [
            {"reason": "no route to the vulnerability data", "expires": datetime.date(2027, 1, 31)}
        ]
    }
    allowed = audit.judge(blind, allowance, TODAY, "installed")
    assert (
        not allowed.failed
        and "1 not audited" in allowed.lines[0]
        and "no route" in allowed.lines[1]
    )
    assert audit.judge(blind, allowance, datetime.date(2027, 2, 1), "installed").failed


def test_the_floors_audited_are_pyprojects_lower_bounds_without_the_projects_own_extras():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    floors = dict(line.split("==") for line in audit.floors(pyproject))
    assert (
        floors["pypdf"] == "7.0.1"
        and floors["cryptography"] == "50.0.0"
        and floors["starlette"] == "1.3.1"
    )
    assert pyproject["project"]["name"] not in floors
    assert all(version[0].isdigit() for version in floors.values())


def test_the_repositorys_ignore_file_gives_every_entry_a_reason_and_an_expiry():
    ignores = audit.load_ignores()
    for entry in [*ignores.get("vulnerability", []), *ignores.get("unaudited", [])]:
        assert entry["reason"].strip() and isinstance(entry["expires"], datetime.date)
