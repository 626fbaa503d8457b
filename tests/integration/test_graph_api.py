"""The `solve` graph served by a real `langgraph dev`, called through `langgraph_sdk`.

`langgraph dev` runs the graph under blockbuster, which raises on blocking I/O inside
the event loop, so this also proves the nodes never block it. Model calls go to the
session's shared llama.cpp server.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.integration.conftest import MODEL_ALIAS

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = ROOT / ".venv" / "bin" / "langgraph"
START_TIMEOUT_S = 120.0


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
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


@pytest.fixture(scope="module")
def dev_server(model_server, tmp_path_factory) -> Iterator[DevServer]:
    if not LANGGRAPH.is_file():
        pytest.skip(f"langgraph CLI not found at {LANGGRAPH}")
    work = tmp_path_factory.mktemp("langgraph-dev")
    log_path = work / "langgraph-dev.log"
    port = _free_port()
    env = {
        **os.environ,
        "OPENAI_BASE_URL": model_server,
        "PARALLAX_RESPONSE_FORMAT": "json_schema",
        "PARALLAX_MODEL": MODEL_ALIAS,
        "PARALLAX_MAX_TOKENS": "128",
        "PARALLAX_HOME": str(work / "parallax-home"),
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    }
    for name in ("PARALLAX_GGUF", "PARALLAX_VOTE_MODELS", "PARALLAX_JUDGE_MODEL", "LANGGRAPH_ALLOW_BLOCKING",
                 "BG_JOB_ISOLATED_LOOPS"):
        env.pop(name, None)
    # --no-reload: other people edit the project while tests run; a hot reload would
    # restart the server under a running graph.
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port),
               "--config", str(ROOT / "langgraph.json")]
    with open(log_path, "wb") as log:
        # cwd must be the project root: graph paths in langgraph.json resolve against it.
        # (The in-memory runtime keeps its state in ROOT/.langgraph_api/, which is gitignored.)
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    server = DevServer(url=f"http://127.0.0.1:{port}", log_path=log_path, process=process)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        with httpx.Client(trust_env=False, timeout=2.0) as client:
            while True:
                if process.poll() is not None:
                    pytest.fail(f"langgraph dev exited with code {process.returncode}; log:\n{server.log()}")
                try:
                    if client.get(f"{server.url}/ok").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"langgraph dev not answering after {START_TIMEOUT_S:.0f}s; log:\n{server.log()}")
                time.sleep(0.5)
        yield server
    finally:
        _stop(process)


@pytest.fixture(autouse=True)
def _print_log_on_failure(request, dev_server):
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"----- langgraph dev log ({dev_server.log_path}) -----\n{dev_server.log()}")


async def test_assistants_list_the_solve_graph(dev_server):
    client = get_client(url=dev_server.url)
    assistants = await client.assistants.search()
    assert "solve" in {a["graph_id"] for a in assistants}


async def test_vote_run_through_the_api(dev_server):
    client = get_client(url=dev_server.url)
    thread = await client.threads.create()
    started = time.perf_counter()
    result = await client.runs.wait(
        thread["thread_id"], "solve", input={"task": "What is 2 + 2?", "mode": "vote", "votes": 3, "tenant": "apitest"}
    )
    elapsed = time.perf_counter() - started

    assert isinstance(result, dict), result
    assert "__error__" not in result, result
    assert result["status"] in {"ok", "needs_review"}, result.get("reason")
    assert result["mode"] == "vote"
    assert len(result["trace_id"]) == 32
    kinds = sorted(b["kind"] for b in result["branches"])
    # 3 votes + safety; a judge joins only when the votes did not settle.
    assert kinds in (["safety", "vote", "vote", "vote"], ["judge", "safety", "vote", "vote", "vote"]), kinds
    assert all(b["parent_id"] == result["trace_id"] for b in result["branches"])
    assert not next(b for b in result["branches"] if b["kind"] == "safety")["output"]["flagged"]
    # blockbuster turns blocking I/O in a node into BlockingError, which a branch would record.
    errors = [b["error"] for b in result["branches"] if b.get("error")]
    assert not [e for e in errors if "Blocking" in e], errors

    # The run is stored with the thread, and the thread's state holds the same output.
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["trace_id"] == result["trace_id"]

    # The trace went to the server's store under the run's tenant, with every lifecycle.
    traces = (await client.store.search_items(["traces", "apitest"], limit=10))["items"]
    assert [t["key"] for t in traces] == [result["trace_id"]]
    stored = traces[0]["value"]
    assert all(b["transitions"][0]["state"] == "PENDING" and b["state"] in ("COMPLETED", "ESCALATED")
               for b in stored["branches"])
    assert (await client.store.search_items(["traces", "default"], limit=10))["items"] == []
    print(f"API vote run: {elapsed:.1f}s, status={result['status']}, votes={result['votes']}, "
          f"answer={result['answer']!r}, branches={kinds}, errors={errors}")
