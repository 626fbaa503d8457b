"""Dead letters end to end: real `parallax` processes, a real HTTP model server that fails, SQLite
on disk.

Every call fails with HTTP 500 until the server is healed; the run ends `failed` with its
votes escalated after their retries. `parallax dlq retry` then runs one again against the
healed server and resolves it; `parallax trace` shows the path each vote took.
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


def parallax(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([PARALLAX, *args], env=env, capture_output=True, text=True, timeout=120)


def test_escalated_votes_are_dead_lettered_and_retried_over_http(tmp_path):
    server = FaultServer(FaultConfig(rate_500=1.0, seed=1))
    with server as url:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": url,
            "PARALLAX_RESPONSE_FORMAT": "json_object_schema",
            "PARALLAX_HOME": str(tmp_path / "home"),
            "PARALLAX_MAX_ATTEMPTS": "2",
            "PARALLAX_TENANT": "acme",
        }
        run = parallax("run", "What is 6 * 7?", "--mode", "vote", "--votes", "3", "--json", env=env)
        assert run.returncode == 1, run.stderr
        out = json.loads(run.stdout)
        assert out["status"] == "failed" and len(out["failed_branches"]) == 3
        assert sum(e["status"] == 500 for e in server.log()) == 6  # 3 votes x 2 attempts

        trace = json.loads(parallax("trace", out["trace_id"], "--json", env=env).stdout)
        votes = [b for b in trace["branches"] if b["kind"] == "vote"]
        assert [t["state"] for t in votes[0]["transitions"]] == [
            "PENDING",
            "DISPATCHED",
            "IN_PROGRESS",
            "FAILED",
            "RETRY",
            "IN_PROGRESS",
            "FAILED",
            "ESCALATED",
        ]

        letters = json.loads(parallax("dlq", "list", "--json", env=env).stdout)
        assert sorted(d["id"] for d in letters) == sorted(out["failed_branches"])
        assert (
            json.loads(parallax("dlq", "list", "--json", "--tenant", "other", env=env).stdout) == []
        )

        server.config = FaultConfig(seed=1)  # healed
        retried = parallax("dlq", "retry", letters[0]["id"], "--json", env=env)
        assert retried.returncode == 0, retried.stderr
        assert json.loads(retried.stdout)["status"] == "resolved"
        assert sum(e["status"] == 200 for e in server.log()) == 1
        still_open = json.loads(parallax("dlq", "list", "--json", env=env).stdout)
        assert len(still_open) == 2 and letters[0]["id"] not in {d["id"] for d in still_open}


def test_eight_processes_at_once_keep_every_trace_and_dead_letter(tmp_path):
    """Concurrent `parallax run` processes write traces and dead letters into one SQLite store."""
    with FaultServer(FaultConfig(latency_ms=200, rate_500=0.3, seed=3)) as url:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": url,
            "PARALLAX_RESPONSE_FORMAT": "json_object_schema",
            "PARALLAX_HOME": str(tmp_path / "home"),
            "PARALLAX_MAX_ATTEMPTS": "1",
        }
        runs = [
            subprocess.Popen(
                [PARALLAX, "run", f"What is {i} * 7?", "--mode", "vote", "--votes", "4", "--json"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(8)
        ]
        outs = [json.loads(run.communicate(timeout=180)[0]) for run in runs]
        assert all(run.returncode in (0, 1) for run in runs)
        for out in outs:
            trace = json.loads(parallax("trace", out["trace_id"], "--json", env=env).stdout)
            assert sorted(b["id"] for b in trace["branches"]) == sorted(
                b["id"] for b in out["branches"]
            )
        failed = sorted(b for out in outs for b in out["failed_branches"])
        assert failed, "the fault rate should fail some votes"
        letters = json.loads(parallax("dlq", "list", "--json", env=env).stdout)
        assert sorted(d["id"] for d in letters) == failed
