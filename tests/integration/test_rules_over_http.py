"""`ok` is a promise, checked end to end: real `parallax run` processes against a scripted HTTP
model.

Two rules of issue 11, each seen on the embedded model before it existed: a vote where 5 of
6 votes failed ended `ok` because the judge "chose" the only answer; a section run whose
findings were filler words ended `ok`. Here the fault server's replies reproduce both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.fault_server import FaultConfig, FaultServer

pytestmark = pytest.mark.integration
PARALLAX = str(Path(sys.executable).with_name("parallax"))


def run(url: str, home: Path, *args: str) -> dict:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": url,
        "PARALLAX_RESPONSE_FORMAT": "json_object_schema",
        "PARALLAX_HOME": str(home),
        "PARALLAX_MAX_ATTEMPTS": "1",
    }
    done = subprocess.run(
        [PARALLAX, "run", *args, "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_vote_below_its_quorum_is_needs_review_and_no_judge_is_asked(tmp_path):
    def reply(body: dict) -> str:
        text = json.dumps(body.get("messages", []))
        if "Candidate answers" in text:
            return json.dumps({"choice": "42", "reason": "the only one"})
        # one voter answers; the other five never produce JSON (re-asked twice, then failed)
        return (
            json.dumps({"reasoning": "r", "answer": "42"})
            if body.get("temperature") == 0.3
            else "no idea"
        )

    with FaultServer(FaultConfig(reply=reply)) as url:
        out = run(url, tmp_path / "home", "What is 6 * 7?", "--mode", "vote", "--votes", "6")
    assert out["status"] == "needs_review", out
    assert "only 1 of 6 votes were valid, below the quorum of 4" in out["reason"]
    assert "judge" not in {b["kind"] for b in out["branches"]}


def test_a_section_run_of_filler_findings_is_needs_review(tmp_path):
    document = "\n\n".join(
        f"# Part {i}\nThe committee met on day {i} and agreed item {i}. " * 20 for i in range(3)
    )
    filler = json.dumps(
        {
            "relevant": True,
            "points": [
                {"quote": w, "point": w}
                for w in ("relevant", "furthermore", "notable", "otherwise")
            ],
        }
    )
    source = tmp_path / "doc.md"
    source.write_text(document)
    with FaultServer(FaultConfig(reply=lambda body: filler)) as url:
        out = run(
            url,
            tmp_path / "home",
            "--input-file",
            str(source),
            "--question",
            "What was agreed?",
            "--mode",
            "section",
        )
    assert out["status"] == "needs_review" and out["answer"] == "", out
    assert (
        out["verification"]["facts"]["verified"] == 0
        and out["verification"]["facts"]["checked"] > 0
    )
