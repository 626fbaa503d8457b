"""The fault-injecting model server's command line (testkit/fault_server.py), as a real process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from tests.unit.test_fault_server import ask


def test_command_line_prints_its_url_and_stops_on_sigterm(tmp_path):
    log_file = tmp_path / "cli.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "testkit.fault_server",
            "--port",
            "0",
            "--fault-rate",
            "0",
            "--seed",
            "3",
            "--log",
            str(log_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("fault server at http://127.0.0.1:") and line.endswith("/v1")
        url = line.removeprefix("fault server at ")
        assert ask(url).choices[0].message.content == "42"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [json.loads(x)["status"] for x in log_file.read_text().splitlines()] == [200]
    bad = subprocess.run(
        [sys.executable, "-m", "testkit.fault_server", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 2 and "loopback" in bad.stderr
