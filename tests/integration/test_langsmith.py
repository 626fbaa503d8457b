"""LangSmith tracing, offline: with LANGSMITH_TRACING=true every model call of a run reaches a
(local) LangSmith endpoint with the branch's metadata: trace id, branch id, kind, parent, playbook
and prompt versions.

The endpoint is a small HTTP receiver on loopback that records what the LangSmith client posts. The
traced run happens in a child process, because the LangSmith client reads its settings once per
process.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INFO = {
    "version": "0.0.0-test",
    "instance_flags": {},
    "batch_ingest_config": {
        "use_multipart_endpoint": False,
        "scale_up_qsize_trigger": 1000,
        "scale_up_nthreads_limit": 4,
        "scale_down_nempty_trigger": 4,
        "size_limit": 100,
        "size_limit_bytes": 20_971_520,
    },
}
CHILD = """
import asyncio, json
from langgraph.store.memory import InMemoryStore
from parallax.graphs.solve import builder
from testkit.scripted_model import scripted

async def main():
    ctx, _ = scripted(lambda p, t, i: json.dumps({"reasoning": "r", "answer": "4"}))
    out = await builder.compile(store=InMemoryStore()).ainvoke(
        {"task": "What is 2 + 2?", "mode": "vote", "votes": 3},
        {"configurable": {"thread_id": "ls-1"}},
        context=ctx)
    print(json.dumps({"trace_id": out["trace_id"], "branches": [b["id"] for b in out["branches"]]}))

asyncio.run(main())
from langchain_core.tracers.langchain import wait_for_all_tracers
wait_for_all_tracers()
"""


class Receiver(BaseHTTPRequestHandler):
    runs: list[dict] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def _reply(self, body: dict, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        return json.loads(raw or b"{}")

    def do_GET(self) -> None:
        self._reply(INFO if self.path.startswith("/info") else {})

    def do_POST(self) -> None:
        body = self._body()
        if self.path.startswith("/runs/batch"):
            Receiver.runs += body.get("post", []) + body.get("patch", [])
        elif self.path.rstrip("/").endswith("/runs"):
            Receiver.runs.append(body)
        self._reply({})

    def do_PATCH(self) -> None:
        Receiver.runs.append(self._body())
        self._reply({})


def test_every_model_call_is_traced_with_branch_metadata():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {
            **os.environ,
            "LANGSMITH_TRACING": "true",
            "LANGSMITH_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
            "LANGSMITH_API_KEY": "lsv2-test-key",
            "LANGSMITH_PROJECT": "parallax-test",
            "PYTHONPATH": str(ROOT),
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        child = subprocess.run(
            [sys.executable, "-c", CHILD],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert child.returncode == 0, child.stderr[-3000:]
        out = json.loads(child.stdout.strip().splitlines()[-1])
    finally:
        server.shutdown()
    llm_runs = [r for r in Receiver.runs if r.get("run_type") == "llm"]
    metadata = [r["extra"]["metadata"] for r in llm_runs]
    assert len(llm_runs) == 3, [r.get("name") for r in Receiver.runs]
    assert {m["parallax_branch_id"] for m in metadata} == {
        b for b in out["branches"] if b.startswith("vote-")
    }
    for m in metadata:
        assert m["parallax_trace_id"] == m["parent_id"] == out["trace_id"] and m["kind"] == "vote"
        assert (m["playbook"], m["playbook_version"], m["playbook_arm"]) == ("default", 0, "head")
        assert (m["prompt"], m["prompt_version"]) == ("answer", 0) and m["prompt_versions"][
            "judge"
        ] == 0
    # the graph run itself is traced too: its root run carries the thread
    roots = [
        r
        for r in Receiver.runs
        if r.get("run_type") == "chain" and not r.get("parent_run_id") and r.get("extra")
    ]
    assert any(r["extra"].get("metadata", {}).get("thread_id") == "ls-1" for r in roots), [
        r.get("name") for r in roots
    ]
