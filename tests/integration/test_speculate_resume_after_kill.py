"""Kill a real `parallax run --mode speculate --check ...` (SIGKILL) while its candidates are being
checked, resume it, and count what the model was asked.

The scripted server answers the three candidates at once; each candidate's check then waits on a
hold file, so the process dies with every candidate made and none checked. `parallax resume` must
check them again without asking the model again: the server's log still holds three requests, and
the run picks the candidate that passes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.fault_server import FaultConfig, FaultServer, chat_log

pytestmark = pytest.mark.integration
PARALLAX = str(Path(sys.executable).with_name("parallax"))
CHECK = r"""
import os, sys, time
marks = sys.argv[1]
text = open("candidate.txt").read()
open(os.path.join(marks, text.split()[1]), "w").close()
while os.path.exists(os.path.join(marks, "hold")):
    time.sleep(0.05)
sys.exit(0 if "PASS" in text else 1)
"""
ANSWERS = {0.2: "FAIL one", 0.6: "PASS two", 1.0: "FAIL three"}


def test_a_run_killed_mid_check_resumes_without_asking_for_its_candidates_again(tmp_path):
    def reply(body: dict) -> str:
        return json.dumps(
            {"reasoning": "r", "answer": ANSWERS[round(body["temperature"], 3)], "files": []}
        )

    marks = tmp_path / "marks"
    marks.mkdir()
    (marks / "hold").touch()
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    server = FaultServer(FaultConfig(latency_ms=200, reply=reply))
    with server as url:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": url,
            "PARALLAX_RESPONSE_FORMAT": "json_schema",
            "PARALLAX_HOME": str(tmp_path / "home"),
            "PARALLAX_MAX_ATTEMPTS": "1",
            "PARALLAX_CHECK_SANDBOX": "off",
        }  # the check marks this test's folder: bubblewrap would give it its own /tmp
        args = [
            "run",
            "Write a function.",
            "--mode",
            "speculate",
            "--candidates",
            "3",
            "--check",
            f"{sys.executable} {script} {marks}",
            "--thread",
            "t-spec",
            "--json",
        ]
        run = subprocess.Popen(
            [PARALLAX, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while (
            len(list(marks.iterdir())) < 4
        ):  # the hold file and one mark per candidate in its check
            assert time.monotonic() < deadline and run.poll() is None, (
                run.stderr.read() if run.poll() is not None else ""
            )
            time.sleep(0.05)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        assert len(chat_log(url)) == 3
        (marks / "hold").unlink()  # the orphaned checks of the killed run end

        resumed = subprocess.run(
            [PARALLAX, "resume", "t-spec", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        out = json.loads(resumed.stdout)
        assert (out["status"], out["mode"], out["answer"]) == ("ok", "speculate", "PASS two"), out[
            "reason"
        ]
        assert len(chat_log(url)) == 3  # no candidate was asked for again
        candidates = [b for b in out["branches"] if b["kind"] == "candidate"]
        assert len(candidates) == 3 and all(b["speculation"].get("reused") for b in candidates)
        assert not any(
            (tmp_path / "home" / "candidates").glob("*/*")
        )  # the killed run's folders are gone too
