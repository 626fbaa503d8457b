"""Arize Phoenix (an OpenTelemetry backend) started for a test, and the spans it received, read back
through its REST API.

Phoenix comes from its own venv, `.venv-phoenix` at the repository's root (`.ci/run` makes it:
`python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install arize-phoenix`), or `PARALLAX_PHOENIX`
naming its `phoenix` command: its dependencies are many and pinned, and none of them is Parallax's.
It takes OTLP/HTTP on its web port (`/v1/traces`), keeps spans in SQLite in a folder of the test's
and serves them at `GET /v1/projects/{project}/spans`. Without it a test skips, and fails in CI.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180.0


def phoenix_command() -> Path | None:
    named = os.environ.get("PARALLAX_PHOENIX")
    found = Path(named) if named else ROOT / ".venv-phoenix" / "bin" / "phoenix"
    return found if found.is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Phoenix:
    url: str
    log_path: Path

    @property
    def otlp_env(self) -> dict[str, str]:
        """What a process needs to send its runs here."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.url, "OTEL_SERVICE_NAME": "parallax-test"}

    def spans(self, trace_id: str, want: int = 1, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The spans of one trace in the default project, waiting until at least `want` arrived."""
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found, cursor = [], None
            while True:
                params: dict[str, Any] = {"limit": 1000, "trace_id": trace_id}
                if cursor:
                    params["cursor"] = cursor
                page = httpx.get(f"{self.url}/v1/projects/default/spans", params=params, timeout=30)
                page.raise_for_status()
                body = page.json()
                found += [s for s in body["data"] if s["context"]["trace_id"] == trace_id]
                cursor = body.get("next_cursor")
                if not cursor:
                    break
            if len(found) >= want:
                return found
            time.sleep(0.5)
        return found

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


@contextmanager
def phoenix_server(work: Path) -> Iterator[Phoenix]:
    import pytest

    command = phoenix_command()
    if command is None:
        pytest.skip("Arize Phoenix is not installed: "
                    "python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install arize-phoenix")
    port, grpc = free_port(), free_port()
    log_path = work / "phoenix.log"
    env = {**os.environ, "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_WORKING_DIR": str(work / "phoenix"), "PHOENIX_TELEMETRY_ENABLED": "false",
           "DO_NOT_TRACK": "1"}
    with open(log_path, "w") as log:
        process = subprocess.Popen([str(command), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = Phoenix(f"http://127.0.0.1:{port}", log_path)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"phoenix serve exited ({process.returncode}):\n{server.log()}")
            try:
                if httpx.get(f"{server.url}/v1/projects", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"phoenix serve did not answer in {START_TIMEOUT_S:.0f} s:\n{server.log()}")
            time.sleep(1)
        yield server
    finally:
        stop_group(process)
