"""OpenTelemetry export: a stored run becomes a span tree with the trace store's ids, parents,
counts and statuses; no text leaves without the GenAI content switch; a caller's W3C trace context
becomes the parent.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from parallax.cli import app
from parallax.runtime import telemetry
from testkit.scripted_model import scripted

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def spans(monkeypatch):
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"
    )  # turns export on; the exporter is in memory
    memory = InMemorySpanExporter()
    telemetry.provider(memory)
    yield memory
    telemetry._provider.clear()


def finished(memory: InMemorySpanExporter) -> tuple:
    """The spans made so far: a run hands its trace to the exporter's thread, which `flush` waits
    for."""
    telemetry.flush()
    return memory.get_finished_spans()


def run(tmp_path, monkeypatch, *args: str) -> dict:
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    ctx, _ = scripted(lambda p, t, i: json.dumps({"reasoning": "r", "answer": "22"}))
    result = CliRunner().invoke(
        app, ["run", "17 sheep plus 5 sheep: how many?", *args, "--json"], obj=ctx
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_export_is_off_unless_the_otel_variables_ask(monkeypatch):
    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_TRACES_EXPORTER",
        "OTEL_SDK_DISABLED",
    ):
        monkeypatch.delenv(name, raising=False)
    assert not telemetry.enabled() and telemetry.export_trace({"trace_id": "a" * 32}) == 0
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert telemetry.enabled()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not telemetry.enabled()


def test_a_vote_run_is_one_span_tree_with_the_trace_stores_ids(spans, tmp_path, monkeypatch):
    out = run(tmp_path, monkeypatch, "--mode", "vote", "--votes", "3")
    made = finished(spans)
    runs = [s for s in made if s.name.startswith("parallax.run")]
    branches = [s for s in made if s.name.startswith("parallax.branch")]
    calls = [s for s in made if s.name.startswith("chat")]
    assert len(runs) == 1 and {format(s.context.trace_id, "032x") for s in made} == {
        out["trace_id"]
    }
    root = runs[0]
    assert root.parent is None and root.attributes["parallax.status"] == out["status"] == "ok"
    assert sorted(s.attributes["parallax.branch_id"] for s in branches) == sorted(
        b["id"] for b in out["branches"]
    )
    assert all(s.parent.span_id == root.context.span_id for s in branches)
    by_id = {s.context.span_id: s for s in branches}
    model_branches = [b for b in out["branches"] if b["kind"] == "vote"]
    assert (
        len(calls) == len(model_branches) == 3
    )  # one call per vote; the safety screen calls no model
    assert all(by_id[c.parent.span_id].attributes["parallax.kind"] == "vote" for c in calls)
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in calls) == sum(
        b["tokens"]["prompt"] for b in model_branches
    )
    assert all(c.attributes["gen_ai.operation.name"] == "chat" for c in calls)
    assert not any(
        "parallax.output" in s.attributes or "parallax.answer" in s.attributes for s in made
    )


def test_text_leaves_only_when_content_capture_is_on(spans, tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    run(tmp_path, monkeypatch, "--mode", "vote", "--votes", "2")
    root = next(s for s in finished(spans) if s.name.startswith("parallax.run"))
    assert root.attributes["parallax.answer"] == "22"


def test_exporting_a_trace_again_gives_the_same_span_ids(spans):
    trace = {
        "trace_id": "c" * 32,
        "mode": "direct",
        "status": "ok",
        "branches": [
            {
                "id": "direct-1",
                "kind": "direct",
                "status": "ok",
                "model": "m",
                "tokens": {"prompt": 5, "completion": 2},
                "transitions": [
                    {"state": s, "at": 100.0 + i, "reason": ""}
                    for i, s in enumerate(("PENDING", "DISPATCHED", "IN_PROGRESS", "COMPLETED"))
                ],
            }
        ],
    }
    telemetry.export_trace(trace)
    first = sorted(s.context.span_id for s in finished(spans))
    spans.clear()
    telemetry.export_trace(trace)
    assert sorted(s.context.span_id for s in finished(spans)) == first and len(first) == 3


def test_a_callers_traceparent_makes_the_run_its_child(spans):
    trace = {"trace_id": "d" * 32, "mode": "direct", "status": "ok", "branches": []}
    telemetry.export_trace(trace, telemetry.parent_from({"traceparent": CALLER}))
    (root,) = finished(spans)
    assert format(root.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert (
        format(root.parent.span_id, "016x") == "b7ad6b7169203331"
        and root.attributes["parallax.trace_id"] == "d" * 32
    )


def test_a_python_api_run_inside_the_callers_span_is_its_child(spans, tmp_path, monkeypatch):
    from opentelemetry.sdk.trace import TracerProvider

    import parallax

    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    ctx, _ = scripted(lambda p, t, i: json.dumps({"reasoning": "r", "answer": "4"}))
    caller = TracerProvider().get_tracer(
        "the-callers-app"
    )  # the application's own provider, not Parallax's
    with caller.start_as_current_span("handle request") as mine:
        result = parallax.solve("What is 2 + 2?", mode="direct", context=ctx)
    root = next(s for s in finished(spans) if s.name.startswith("parallax.run"))
    assert root.context.trace_id == mine.get_span_context().trace_id
    assert (
        root.parent.span_id == mine.get_span_context().span_id
        and root.attributes["parallax.trace_id"] == result.trace_id
    )
