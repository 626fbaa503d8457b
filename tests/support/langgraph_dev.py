"""A real `langgraph dev` server on a free loopback port, for integration tests.

Why this exists: the graph API's tests and the OpenAI face's tests both need the server
`langgraph dev` starts from langgraph.json (graphs and the `http.app` faces), each pointed at
its own model endpoint. It runs with `--no-reload` (other people edit the project while tests
run; a hot reload would restart the server under a running graph), from the project root
(langgraph.json's paths resolve against it), in its own process group, stopped by PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = ROOT / ".venv" / "bin" / "langgraph"
START_TIMEOUT_S = 120.0


class DevServerError(RuntimeError):
    """langgraph dev exited or did not answer; the message holds its log."""


@dataclass
class DevServer:
    url: str
    log_path: Path
    process: subprocess.Popen

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the whole process group, SIGKILL after 10 s."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


@contextmanager
def langgraph_dev(work: Path, env: dict[str, str]) -> Iterator[DevServer]:
    """`langgraph dev` with `env` added to this process's environment; stopped on exit."""
    log_path = work / "langgraph-dev.log"
    port = free_port()
    full = {**os.environ, "PARALLAX_HOME": str(work / "parallax-home"), "LANGSMITH_TRACING": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1", **env}
    for name in ("PARALLAX_GGUF", "PARALLAX_VOTE_MODELS", "PARALLAX_JUDGE_MODEL", "LANGGRAPH_ALLOW_BLOCKING",
                 "BG_JOB_ISOLATED_LOOPS"):
        full.pop(name, None)
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port),
               "--config", str(ROOT / "langgraph.json")]
    with open(log_path, "wb") as log:
        # (the in-memory runtime keeps its state in ROOT/.langgraph_api/, which is gitignored)
        process = subprocess.Popen(command, cwd=ROOT, env=full, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    server = DevServer(url=f"http://127.0.0.1:{port}", log_path=log_path, process=process)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        with httpx.Client(trust_env=False, timeout=2.0) as client:
            while True:
                if process.poll() is not None:
                    raise DevServerError(f"langgraph dev exited with code {process.returncode}; log:\n{server.log()}")
                try:
                    if client.get(f"{server.url}/ok").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise DevServerError(f"langgraph dev not answering after {START_TIMEOUT_S:.0f}s; log:\n{server.log()}")
                time.sleep(0.5)
        yield server
    finally:
        stop(process)
