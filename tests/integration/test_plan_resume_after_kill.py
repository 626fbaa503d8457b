"""Kill a real `parallax run --mode plan` (SIGKILL) while tasks run, resume it, and count what the
model was asked.

The fault-injecting server answers every call after a fixed latency and counts the
replies it finished, per task goal. With two tasks at a time, tasks 1 and 2 finish while
3 and 4 are in flight when the process dies. `parallax resume` must redo neither the plan
nor a finished task: every finished task's goal is answered exactly once in total, and
the joining task 5 still sees the results of 1 and 2.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from testkit.fault_server import FaultConfig, FaultServer

pytestmark = pytest.mark.integration
PARALLAX = str(Path(sys.executable).with_name("parallax"))
PLAN = {
    "tasks": (
        [{"id": i, "goal": f"GOAL-{i} name a colour"} for i in (1, 2, 3, 4)]
        + [{"id": 5, "goal": "GOAL-5 join $1 $2 $3 $4", "deps": [1, 2, 3, 4]}]
    ),
    "outputs": [5],
}


def test_killed_plan_resumes_without_redoing_finished_tasks(tmp_path):
    answered: Counter = Counter()
    lock = threading.Lock()

    def reply(body: dict) -> str:
        text = json.dumps(body.get("messages", []))
        if "You plan work as a small graph" in text:
            with lock:
                answered["plan"] += 1
            return json.dumps(PLAN)
        goal = next(f"GOAL-{i}" for i in (5, 1, 2, 3, 4) if f"GOAL-{i}" in text)
        with lock:
            answered[goal] += 1
        seen = " ".join(f"saw-{i}" for i in (1, 2, 3, 4) if f"colour-{i}" in text)
        return json.dumps(
            {"reasoning": "r", "answer": f"colour-{goal[-1]}" + (f" {seen}" if seen else "")}
        )

    server = FaultServer(FaultConfig(latency_ms=1500, seed=0, reply=reply))
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
            "Name four colours, then join them.",
            "--mode",
            "plan",
            "--concurrency",
            "2",
            "--thread",
            "t-plan",
            "--json",
        ]
        run = subprocess.Popen(
            [PARALLAX, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 90
        while sum(answered[f"GOAL-{i}"] for i in (1, 2, 3, 4)) < 2:
            assert time.monotonic() < deadline and run.poll() is None, (
                "the run never finished two tasks"
            )
            time.sleep(0.05)
        time.sleep(0.7)  # let the two finished tasks reach the checkpoint and the store
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        finished = {g for g, n in answered.items() if g != "plan" and n}
        assert len(finished) == 2 and answered["GOAL-5"] == 0, answered

        resumed = subprocess.run(
            [PARALLAX, "resume", "t-plan", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        out = json.loads(resumed.stdout)
        assert out["status"] == "ok" and out["mode"] == "plan" and out["thread_id"] == "t-plan", (
            out["reason"]
        )
        assert answered["plan"] == 1  # the plan was not made again
        assert all(answered[g] == 1 for g in finished), (
            answered
        )  # finished tasks were not run again
        assert all(answered[f"GOAL-{i}"] == 1 for i in (1, 2, 3, 4, 5)), answered
        assert (
            out["answer"] == "colour-5 saw-1 saw-2 saw-3 saw-4"
        )  # task 5 saw every result, old and new
        assert [t["status"] for t in out["tasks"]] == ["DONE"] * 5
