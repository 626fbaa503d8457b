"""`langgraph dev` started for a test on a free loopback port, stopped by its process group.

Why a module: the chat API tests and the browser test need the same server the README's
"Graph API" section starts (langgraph.json, the test extra's CLI), pointed at a scripted model.
`--no-reload`, because other people edit the project while tests run and a hot reload would
restart the server under a running graph. Each server runs in its own work directory, with a
copy of langgraph.json whose graph paths point back at the project: the in-memory runtime keeps
its threads, runs and store in `.langgraph_api/` under its working directory and reloads them
on the next start, so servers sharing the project root would see each other's (and earlier
sessions') traces.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from parallax.runtime.http_ready import wait_for_200

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).with_name("langgraph")


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
    return {"OPENAI_BASE_URL": model_url, "PARALLAX_RESPONSE_FORMAT": "json_schema", "PARALLAX_MODEL": "fault-model",
            "PARALLAX_STRAGGLER_FACTOR": "0"}


def start_dev_server(work: Path, model_env: dict[str, str], timeout_s: float = 120.0) -> DevServer:
    """`langgraph dev` on the project with `model_env` (OPENAI_BASE_URL, PARALLAX_MODEL, ...); RuntimeError with
    the log when it does not answer /ok within `timeout_s`."""
    port = free_port()
    log_path = work / "langgraph-dev.log"
    env = {**os.environ, "PARALLAX_HOME": str(work / "parallax-home"), "LANGSMITH_TRACING": "false",
           "LANGGRAPH_CLI_NO_ANALYTICS": "1", **model_env}
    for name in ("PARALLAX_GGUF", "PARALLAX_VOTE_MODELS", "PARALLAX_JUDGE_MODEL", "LANGGRAPH_ALLOW_BLOCKING",
                 "BG_JOB_ISOLATED_LOOPS", "PARALLAX_DATABASE_URL"):
        env.pop(name, None)
    config = json.loads((ROOT / "langgraph.json").read_text())
    config["graphs"] = {name: str(ROOT / path) if path.startswith("./") else path for name, path in config["graphs"].items()}
    config["dependencies"] = [str(ROOT)]
    (work / "langgraph.json").write_text(json.dumps(config))
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port),
               "--config", str(work / "langgraph.json")]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    server = DevServer(f"http://127.0.0.1:{port}", log_path, process)
    outcome = wait_for_200(f"{server.url}/ok", timeout_s, alive=lambda: process.poll() is None)
    if outcome != "ready":
        server.stop()
        raise RuntimeError(f"langgraph dev {outcome} (exit {process.returncode}); log:\n{server.log()[-4000:]}")
    return server
