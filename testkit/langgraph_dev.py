"""`langgraph dev` started for a test on a free loopback port, stopped by its process group.

Why a module: the graph API's tests, the OpenAI face's, the chat API's and the browser test all
need the server the README's graph API section starts (langgraph.json: its graphs and its
`http.app` faces, the test extra's CLI), pointed at a scripted model. `--no-reload`, because
other people edit the project while tests run and a hot reload would restart the server under a
running graph. Each server runs in its own work directory, with a copy of langgraph.json whose
paths point back at the project: the in-memory runtime keeps its threads, runs and store in
`.langgraph_api/` under its working directory and reloads them on the next start, so servers
sharing the project root would see each other's (and earlier sessions') traces.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parallax.runtime.model_server import wait_for_200

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).with_name("langgraph")
START_TIMEOUT_S = 120.0


class DevServerError(RuntimeError):
    """langgraph dev exited or did not answer; the message holds its log."""


@dataclass
class DevServer:
    url: str
    log_path: Path
    process: subprocess.Popen
    model: Any = None
    """The scripted model server behind it, when a test started one (`scripted_dev_server`)."""

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM to the whole process group, SIGKILL after 10 s."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(10)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fault_model_env(model_url: str) -> dict[str, str]:
    """The settings for a server whose model is the fault server at `model_url` (…/v1)."""
    return {
        "OPENAI_BASE_URL": model_url,
        "PARALLAX_RESPONSE_FORMAT": "json_schema",
        "PARALLAX_MODEL": "fault-model",
        "PARALLAX_STRAGGLER_FACTOR": "0",
    }


def _absolute(path: str) -> str:
    return str(ROOT / path) if path.startswith("./") else path


def start_dev_server(
    work: Path, model_env: dict[str, str], timeout_s: float = START_TIMEOUT_S
) -> DevServer:
    """`langgraph dev` on the project with `model_env` (OPENAI_BASE_URL, PARALLAX_MODEL, ...);
    DevServerError with the log when it does not answer /ok within `timeout_s`."""
    port = free_port()
    log_path = work / "langgraph-dev.log"
    env = {
        **os.environ,
        "PARALLAX_HOME": str(work / "parallax-home"),
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        **model_env,
    }
    for name in (
        "PARALLAX_GGUF",
        "PARALLAX_VOTE_MODELS",
        "PARALLAX_JUDGE_MODEL",
        "LANGGRAPH_ALLOW_BLOCKING",
        "BG_JOB_ISOLATED_LOOPS",
        "PARALLAX_DATABASE_URL",
    ):
        if name not in model_env:
            env.pop(name, None)
    config = json.loads((ROOT / "langgraph.json").read_text())
    config["graphs"] = {name: _absolute(path) for name, path in config["graphs"].items()}
    if "http" in config and "app" in config["http"]:
        config["http"]["app"] = _absolute(config["http"]["app"])
    config["dependencies"] = [str(ROOT)]
    (work / "langgraph.json").write_text(json.dumps(config))
    command = [
        str(LANGGRAPH),
        "dev",
        "--no-browser",
        "--no-reload",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--config",
        str(work / "langgraph.json"),
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = DevServer(f"http://127.0.0.1:{port}", log_path, process)
    outcome = wait_for_200(f"{server.url}/ok", timeout_s, alive=lambda: process.poll() is None)
    if outcome != "ready":
        server.stop()
        raise DevServerError(
            f"langgraph dev {outcome} (exit {process.returncode}); log:\n{server.log()[-4000:]}"
        )
    return server


@contextmanager
def langgraph_dev(work: Path, env: dict[str, str]) -> Iterator[DevServer]:
    """`start_dev_server` as a context: stopped on exit."""
    server = start_dev_server(work, env)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def scripted_dev_server(
    work: Path, reply: Any, latency_ms: float = 0.0, **env: str
) -> Iterator[DevServer]:
    """`langgraph dev` whose model is the fault server answering with `reply`
    (testkit/fault_server.py), `env` added to `fault_model_env`'s settings; `server.model` is the
    fault server. Both stopped on exit.
    """
    from testkit.fault_server import FaultConfig, FaultServer

    model = FaultServer(FaultConfig(latency_ms=latency_ms, reply=reply))
    with model as model_url, langgraph_dev(work, {**fault_model_env(model_url), **env}) as server:
        server.model = model
        yield server
