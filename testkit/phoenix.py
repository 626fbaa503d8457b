"""Arize Phoenix (an OpenTelemetry backend) started for a test, and the spans it received, read back
through its REST API.

Phoenix comes from its own venv, `.venv-phoenix` at the repository's root (`.ci/run` makes it:
`python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install arize-phoenix`), or
`PARALLAX_PHOENIX` naming its `phoenix` command: its dependencies are many and pinned, and none of
them is Parallax's. It takes OTLP/HTTP on its web port (`/v1/traces`), keeps spans in SQLite in a
folder of the test's and serves them at `GET /v1/projects/{project}/spans`. Without it a test skips,
and fails in CI.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from testkit.fault_server import default_reply
from testkit.processes import stop_group

ROOT = Path(__file__).resolve().parents[1]
PLAN = {
    "tasks": [
        {"id": 1, "goal": "List the vendors"},
        {"id": 2, "goal": "Total the invoices"},
        {"id": 3, "goal": "Summarise $1 and $2", "deps": [1, 2]},
    ]
}
"""The plan the scripted model's planner answers with (`reply`)."""
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
        pytest.skip(
            "Arize Phoenix is not installed: "
            "python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install arize-phoenix"
        )
    port, grpc = free_port(), free_port()
    log_path = work / "phoenix.log"
    env = {
        **os.environ,
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_WORKING_DIR": str(work / "phoenix"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [str(command), "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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
                pytest.fail(
                    f"phoenix serve did not answer in {START_TIMEOUT_S:.0f} s:\n{server.log()}"
                )
            time.sleep(1)
        yield server
    finally:
        stop_group(process)


def reply(body: dict) -> str:
    """The scripted model of the OpenTelemetry tests: PLAN for a planner, else a minimal reply of
    the asked schema."""
    name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
    return json.dumps(PLAN) if name.lower().startswith("plan") else default_reply(body)


def check_tree(phoenix: Phoenix, trace: dict, root_parent: str | None = None) -> dict:
    """Phoenix's spans of the run against the stored trace (`trace_id`: the OTel trace it is in;
    `root_parent`: the caller's span, when the run joined a caller's trace); what was compared."""
    branches = trace["branches"]
    copies = [b for b in branches for _ in range(2 if b.get("backup") else 1)]
    calls = sum(
        sum(1 for t in b["transitions"] if t["state"] == "IN_PROGRESS")
        for b in branches
        if b["kind"] != "safety"
    )
    calls += sum(
        sum(
            1
            for t in (b.get("backup") or {}).get("other_transitions", [])
            if t["state"] == "IN_PROGRESS"
        )
        for b in branches
        if b["kind"] != "safety"
    )
    tasks = [t for t in trace.get("tasks", []) if t.get("started_at")]
    want = 1 + len(tasks) + len(copies) + calls
    spans = phoenix.spans(trace["trace_id"], want=want)
    names = Counter(s["name"].split(" ")[0] for s in spans)
    expected = {
        "parallax.run": 1,
        "parallax.task": len(tasks),
        "parallax.branch": len(copies),
        "chat": calls,
    }
    assert names == Counter(expected), names
    (root,) = [s for s in spans if s["name"].startswith("parallax.run")]
    assert root["parent_id"] == root_parent
    assert root_parent is not None or root["attributes"]["parallax.trace_id"] == trace["trace_id"]
    assert root["attributes"]["parallax.status"] == trace["status"]
    by_id = {s["context"]["span_id"]: s for s in spans}
    task_spans = {
        s["attributes"]["parallax.task"]: s["context"]["span_id"]
        for s in spans
        if s["name"] == "parallax.task"
    }
    branch_spans = [s for s in spans if s["name"].startswith("parallax.branch")]
    assert Counter(s["attributes"]["parallax.branch_id"] for s in branch_spans) == Counter(
        b["id"] for b in copies
    )
    recorded = {b["id"]: b for b in branches}
    for span in branch_spans:
        branch = recorded[span["attributes"]["parallax.branch_id"]]
        expected_parent = (
            task_spans[branch["task"]]
            if branch.get("task") is not None
            else root["context"]["span_id"]
        )
        assert span["parent_id"] == expected_parent, (span["name"], branch["id"])
        if span["attributes"].get("parallax.status") != "cancelled":
            assert span["attributes"]["parallax.status"] == branch["status"]
    for span in spans:
        if span["name"].startswith("chat"):
            assert by_id[span["parent_id"]]["name"].startswith("parallax.branch")
    return {
        "mode": trace["mode"],
        "status": trace["status"],
        "spans": len(spans),
        "branches_recorded": len(copies),
        "branch_spans": len(branch_spans),
        "model_call_spans": names["chat"],
        "plan_task_spans": names["parallax.task"],
        "parents_matched": True,
    }
