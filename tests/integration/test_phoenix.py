"""OpenTelemetry export against a real backend: Arize Phoenix, started by the test, receives the
spans of a run in each mode from the CLI and from the Python API; read back through Phoenix's REST
API, the span tree is the trace store's: one run span, one span per branch (and per raced copy) with
the branch's id and status, parented on the run (or its plan task), and one model-call span per
call, parented on its branch.

The model is the scripted OpenAI-compatible server (testkit/fault_server.py). `parallax serve`'s
spans, with a client's `traceparent`, are checked in tests/integration/test_deploy_faces.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.fault_server import FaultConfig, FaultServer
from testkit.phoenix import check_tree, phoenix_server, reply

pytestmark = pytest.mark.integration
PARALLAX = Path(sys.executable).with_name("parallax")
DOCUMENT = "\n\n".join(
    f"Section {i}. Invoice {i} from ACME Tools totals {100 + i}.50 EUR and is paid." * 6
    for i in range(1, 7)
)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    with phoenix_server(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


@pytest.fixture(scope="module")
def model():
    server = FaultServer(FaultConfig(reply=reply, latency_ms=10))
    url = server.start()
    yield url
    server.stop()


@pytest.fixture
def env(phoenix, model, tmp_path):
    return {
        **os.environ,
        **phoenix.otlp_env,
        "OPENAI_BASE_URL": model,
        "OPENAI_API_KEY": "sk-test",
        "PARALLAX_MODEL": "fault-model",
        "PARALLAX_RESPONSE_FORMAT": "json_schema",
        "PARALLAX_HOME": str(tmp_path / "home"),
    }


def stored(trace_id: str, env: dict[str, str]) -> dict:
    shown = subprocess.run(
        [str(PARALLAX), "trace", trace_id, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


@pytest.mark.parametrize("mode", ["direct", "vote", "section", "plan", "speculate"])
def test_a_cli_runs_spans_in_phoenix_are_its_trace(mode, phoenix, env, tmp_path):
    args = [
        str(PARALLAX),
        "run",
        "Total the invoices of ACME Tools, then list what is still due.",
        "--mode",
        mode,
        "--json",
    ]
    if mode == "section":
        env = {**env, "PARALLAX_SLICE_CHARS": "600"}  # several slices of the short document
        document = tmp_path / "invoices.txt"
        document.write_text(DOCUMENT)
        args = [
            str(PARALLAX),
            "run",
            "--input-file",
            str(document),
            "-q",
            "What do the invoices total?",
            "--mode",
            mode,
            "--json",
        ]
    if mode == "vote":
        args += ["--votes", "4"]
    ran = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode in (0, 1), ran.stderr
    out = json.loads(ran.stdout)
    compared = check_tree(phoenix, stored(out["trace_id"], env))
    print("phoenix", json.dumps({"face": "cli", **compared}))


def test_a_python_api_run_inside_the_callers_span_lands_in_its_trace(phoenix, env):
    script = """
import json
import parallax
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

app = TracerProvider()  # the calling application's own tracing, sent to the same backend
app.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
with app.get_tracer("the-app").start_as_current_span("answer a customer") as mine:
    result = parallax.solve("What is 6 * 7?", mode="vote", votes=3)
print(json.dumps({"trace_id": result.trace_id,
                  "caller": format(mine.get_span_context().trace_id, "032x"),
                  "caller_span": format(mine.get_span_context().span_id, "016x")}))
"""
    ran = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    trace = stored(out["trace_id"], env)
    calls = sum(
        1
        for b in trace["branches"]
        if b["kind"] != "safety"
        for t in b["transitions"]
        if t["state"] == "IN_PROGRESS"
    )
    spans = phoenix.spans(
        out["caller"], want=2 + len(trace["branches"]) + calls
    )  # the caller's, the run's, ...
    (root,) = [s for s in spans if s["name"].startswith("parallax.run")]
    assert (
        root["attributes"]["parallax.trace_id"] == out["trace_id"]
        and root["parent_id"] == out["caller_span"]
    )
    caller = next(s for s in spans if s["name"] == "answer a customer")
    assert caller["parent_id"] is None
    branches = [s for s in spans if s["name"].startswith("parallax.branch")]
    assert sorted(s["attributes"]["parallax.branch_id"] for s in branches) == sorted(
        b["id"] for b in trace["branches"]
    )
    print(
        "phoenix",
        json.dumps(
            {
                "face": "python",
                "mode": trace["mode"],
                "spans": len(spans),
                "branches_recorded": len(trace["branches"]),
                "branch_spans": len(branches),
                "joined_the_callers_trace": True,
            }
        ),
    )
