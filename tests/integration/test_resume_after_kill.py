"""Kill a real `parallax run` mid-run (SIGKILL), resume it, and count calls in the server's log.

The fault-injecting server answers every call after a fixed latency, so with two
branches at a time the first two votes finish while the next two are in flight when
the process dies. `parallax resume` must re-run only the unfinished votes: every vote
that had finished appears exactly once in the request log (votes differ by temperature).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from testkit.fault_server import FaultConfig, FaultServer

pytestmark = pytest.mark.integration
PARALLAX = str(Path(sys.executable).with_name("parallax"))


def test_killed_run_resumes_without_repeating_finished_branches(tmp_path):
    server = FaultServer(FaultConfig(latency_ms=1500, seed=0))
    with server as url:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": url,
            "PARALLAX_RESPONSE_FORMAT": "json_object_schema",
            "PARALLAX_HOME": str(tmp_path / "home"),
            "PARALLAX_MAX_ATTEMPTS": "1",
        }
        args = [
            "run",
            "What is 6 * 7?",
            "--mode",
            "vote",
            "--votes",
            "6",
            "--no-early-stop",
            "--concurrency",
            "2",
            "--thread",
            "t-kill",
            "--json",
        ]
        run = subprocess.Popen(
            [PARALLAX, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while sum(e["status"] == 200 for e in server.log() if e.get("messages_hash")) < 2:
            assert time.monotonic() < deadline and run.poll() is None, (
                "the run never got two answers"
            )
            time.sleep(0.05)
        time.sleep(0.5)  # let the two finished branches reach the checkpoint
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        chat = [e for e in server.log() if e.get("messages_hash")]
        finished = {e["temperature"] for e in chat if e["status"] == 200}
        assert len(finished) == 2 and len(chat) < 6, chat

        resumed = subprocess.run(
            [PARALLAX, "resume", "t-kill", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        out = json.loads(resumed.stdout)
        assert (
            out["status"] == "ok"
            and out["vote_counts"] == {"42": 6}
            and out["thread_id"] == "t-kill"
        )
        calls = Counter(
            e["temperature"] for e in server.log() if e.get("messages_hash") and e["status"] == 200
        )
        assert len(calls) == 6  # every vote answered
        assert all(calls[t] == 1 for t in finished), calls  # finished votes were not called again
        assert sum(calls.values()) == 6

        again = subprocess.run(
            [PARALLAX, "resume", "t-kill", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert json.loads(again.stdout)["vote_counts"] == {
            "42": 6
        }  # a finished run is reported, not re-run
        assert sum(e["status"] == 200 for e in server.log() if e.get("messages_hash")) == 6
