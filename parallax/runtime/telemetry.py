"""A stored trace exported as OpenTelemetry spans over OTLP, once the run has ended.

See docs/observability.md#opentelemetry.
"""

from __future__ import annotations

import atexit
import contextvars
import hashlib
import json
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

    from parallax.state.lifecycle import Transition
    from parallax.state.trace_record import TraceBranch, TraceRecord

_IDS: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "parallax_span_ids", default=None
)
_lock = threading.Lock()
_provider: list[TracerProvider | None] = []
TRUE = ("1", "true", "yes", "on")
EVENT_STATES = frozenset({"TIMEOUT", "FAILED", "RETRY", "ESCALATED", "CANCELLED"})
"""Lifecycle steps that become span events (the whole path is the attribute `parallax.path`)."""
TRACE_CONTEXT = "parallax_trace_context"
"""The configurable key a served run's W3C trace context travels under: {"traceparent",
"tracestate"?}."""


def enabled() -> bool:
    """Whether the standard OTel variables ask for trace export (read at each call: tests and
    servers set them)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() in TRUE:
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").lower()
    if exporter == "none":
        return False
    return bool(
        exporter in ("otlp", "console")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _sdk_installed() -> bool:
    """Whether the `otel` extra is there; when the variables ask for export without it, say so once,
    on stderr."""
    import importlib.util
    import sys

    if importlib.util.find_spec("opentelemetry.sdk") and importlib.util.find_spec(
        "opentelemetry.exporter.otlp.proto.http"
    ):
        return True
    if not _warned:
        _warned.append(True)
        print(
            "parallax: OTEL_* variables ask for trace export, but the OpenTelemetry SDK is not"
            " installed: pip install 'parallax-graph[otel]' (runs go on without export)",
            file=sys.stderr,
        )
    return False


_warned: list[bool] = []


def capture_content() -> bool:
    return os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").lower() in TRUE


def _id(*parts: str, bits: int = 64) -> int:
    """A stable non-zero id from names (the same run exports the same span ids again)."""
    value = int.from_bytes(
        hashlib.blake2b("\x1f".join(parts).encode(), digest_size=bits // 8).digest(), "big"
    )
    return value or 1


def provider(exporter: SpanExporter | None = None) -> TracerProvider:
    """The process's own tracer provider (never the global one, which belongs to the host
    application): its id generator hands out the ids `_start` chose; its batch processor exports in
    the background. `exporter`: replace the provider with one that sends each span to it at once
    (tests read spans back).
    """
    with _lock:
        if _provider and _provider[0] is not None and exporter is None:
            return _provider[0]
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
        from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

        class ChosenIds(IdGenerator):
            """The ids `_start` put in the context variable; random ones for anything else."""

            fallback = RandomIdGenerator()

            def generate_span_id(self) -> int:
                chosen = _IDS.get()
                return chosen[1] if chosen else self.fallback.generate_span_id()

            def generate_trace_id(self) -> int:
                chosen = _IDS.get()
                return chosen[0] if chosen else self.fallback.generate_trace_id()

        made = TracerProvider(
            resource=Resource.create(
                {"service.name": os.environ.get("OTEL_SERVICE_NAME", "parallax")}
            ),
            id_generator=ChosenIds(),
        )
        if exporter is not None:
            made.add_span_processor(SimpleSpanProcessor(exporter))
        elif os.environ.get("OTEL_TRACES_EXPORTER", "").lower() == "console":
            made.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            made.add_span_processor(
                BatchSpanProcessor(
                    OTLPSpanExporter(), max_queue_size=65536, max_export_batch_size=2048
                )
            )
        _provider[:] = [made]
        return made


_exporting: list[ThreadPoolExecutor] = []
_pending: set[Future[int]] = set()


def export_later(trace: TraceRecord, parent: OtelContext | None = None) -> None:
    """`export_trace` on the exporter's own thread, so the run that recorded the trace does not wait
    for its spans to be made (the one place a run pays for export is handing the trace over). At
    exit what is pending is sent.
    """
    if not enabled() or not _sdk_installed():
        return
    with _lock:
        if not _exporting:
            _exporting.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="parallax-otel"))
            atexit.register(flush)
        future = _exporting[0].submit(export_trace, trace, parent)
        _pending.add(future)
    future.add_done_callback(_pending.discard)


def flush(timeout_ms: int = 30_000) -> bool:
    """Make the spans of every trace handed over, then send what is queued (a CLI process does at
    exit)."""
    for future in list(_pending):
        future.result(timeout_ms / 1000)
    return bool(_provider and _provider[0] is not None and _provider[0].force_flush(timeout_ms))


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _start(
    tracer: Tracer,
    name: str,
    ids: tuple[int, int],
    parent: OtelContext | None,
    start: float,
    attributes: dict[str, Any],
) -> Span:
    token = _IDS.set(ids)
    try:
        return tracer.start_span(
            name,
            context=parent,
            start_time=_ns(start),
            attributes={k: v for k, v in attributes.items() if v is not None},
        )
    finally:
        _IDS.reset(token)


def _child(span: Span) -> OtelContext:
    from opentelemetry import trace

    return trace.set_span_in_context(span)


def _status(span: Span, failed: bool, reason: str = "") -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, reason[:300]) if failed else Status(StatusCode.OK))


def _branch(
    tracer: Tracer,
    trace_id: int,
    root: str,
    parent: OtelContext,
    branch: TraceBranch,
    transitions: list[Transition],
    copy: str,
    content: bool,
) -> int:
    """One branch (or one copy of a raced branch) and its model calls; returns the spans made."""
    if not transitions:
        return 0
    key = branch["id"] + (f"~{copy}" if copy else "")
    lost = copy != "" and (branch.get("backup") or {}).get("winner") != copy
    status = "cancelled" if lost else branch.get("status")
    span = _start(
        tracer,
        f"parallax.branch {branch.get('kind')}",
        (trace_id, _id(root, key)),
        parent,
        transitions[0]["at"],
        _branch_attributes(root, branch, transitions, copy, lost, content),
    )
    for step in (
        transitions
    ):  # the path is an attribute; what went wrong (or was cancelled) is an event with its reason
        if step["state"] in EVENT_STATES or step.get("reason"):
            span.add_event(
                step["state"],
                {"reason": step["reason"]} if step.get("reason") else {},
                timestamp=_ns(step["at"]),
            )
    made = 1 + _call_spans(tracer, (trace_id, root, key), span, branch, transitions, lost)
    _status(
        span,
        status in ("failed", "escalated") or transitions[-1]["state"] == "ESCALATED",
        branch.get("error") or "",
    )
    span.end(end_time=_ns(transitions[-1]["at"]))
    return made


def _branch_attributes(
    root: str,
    branch: TraceBranch,
    transitions: list[Transition],
    copy: str,
    lost: bool,
    content: bool,
) -> dict[str, Any]:
    """A branch span's attributes; a copy that lost its race carries no usage, output or backup
    figures."""
    tokens = branch.get("tokens") or {}
    attributes: dict[str, Any] = {
        "parallax.trace_id": root,
        "parallax.branch_id": branch["id"],
        "parallax.kind": branch.get("kind"),
        "parallax.status": "cancelled" if lost else branch.get("status"),
        "parallax.path": " > ".join(t["state"] for t in transitions),
        "parallax.attempts": branch.get("attempts"),
        "parallax.reasks": branch.get("reasks"),
        "parallax.slice_index": branch.get("slice_index"),
        "parallax.task": branch.get("task"),
        "parallax.vote": branch.get("vote") if content else None,
        "parallax.copy": copy or None,
        "parallax.cancelled": transitions[-1]["state"] == "CANCELLED",
        "gen_ai.request.model": branch.get("model"),
        "gen_ai.request.temperature": branch.get("temperature"),
    }
    if not lost:
        attributes |= {
            "gen_ai.usage.input_tokens": tokens.get("prompt"),
            "gen_ai.usage.output_tokens": tokens.get("completion"),
            "parallax.backup_reason": (branch.get("backup") or {}).get("reason"),
            "parallax.backup_winner": (branch.get("backup") or {}).get("winner"),
        }
        if content and branch.get("output") is not None:
            attributes["parallax.output"] = json.dumps(branch["output"], ensure_ascii=False)[:4000]
    return attributes


def _call_spans(
    tracer: Tracer,
    where: tuple[int, str, str],
    span: Span,
    branch: TraceBranch,
    transitions: list[Transition],
    lost: bool,
) -> int:
    """A span per model call of a branch (an IN_PROGRESS step, ended by the next); the spans made.

    Args:
        where: the OpenTelemetry trace id, the run's trace id and the branch's span key.
    """
    trace_id, root, key = where
    tokens = branch.get("tokens") or {}
    calls = (
        [(i, step) for i, step in enumerate(transitions) if step["state"] == "IN_PROGRESS"]
        if branch.get("kind") != "safety"
        else []
    )  # the safety screen is local: it calls no model
    for number, (i, step) in enumerate(calls, start=1):
        after = transitions[i + 1] if i + 1 < len(transitions) else step
        last = number == len(calls) and not lost
        call_attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": branch.get("model"),
            "gen_ai.request.temperature": branch.get("temperature"),
            "parallax.call": number,
            "parallax.outcome": after["state"],
        }
        if (
            last
        ):  # the record's tokens are the branch's; its last call is the one that produced the reply
            call_attributes |= {
                "gen_ai.usage.input_tokens": tokens.get("prompt"),
                "gen_ai.usage.output_tokens": tokens.get("completion"),
            }
        call = _start(
            tracer,
            f"chat {branch.get('model') or ''}".strip(),
            (trace_id, _id(root, key, "call", str(number))),
            _child(span),
            step["at"],
            call_attributes,
        )
        _status(call, after["state"] in ("FAILED", "TIMEOUT"), after.get("reason", ""))
        call.end(end_time=_ns(after["at"]))
    return len(calls)


def export_trace(trace: TraceRecord, parent: OtelContext | None = None) -> int:
    """Hand a stored trace to the exporter as spans; the number of spans made (0 when export is
    off). `parent`: the caller's context (its span becomes the run's parent), else the run is a
    trace of its own.
    """
    if not enabled() or not _sdk_installed():
        return 0
    from opentelemetry import trace as otel

    tracer = provider().get_tracer("parallax")
    root = trace["trace_id"]
    caller = otel.get_current_span(parent).get_span_context() if parent is not None else None
    joined = caller is not None and caller.is_valid
    trace_id = caller.trace_id if joined and caller is not None else int(root, 16)
    started, ended = _run_window(trace)
    content = capture_content()
    run = _start(
        tracer,
        f"parallax.run {trace.get('mode')}",
        (trace_id, _id(root, "run")),
        parent if joined else None,
        started,
        _run_attributes(trace, content),
    )
    parents: dict[Any, OtelContext] = {None: _child(run)}
    made = 1 + _task_spans(tracer, trace_id, trace, parents)
    for branch in trace.get("branches", []):
        parent_ctx = parents.get((branch.get("task"), branch.get("round", 0)), parents[None])
        backup = branch.get("backup") or {}
        copies = [("", branch.get("transitions") or [])]
        if backup:
            won, lost = (
                ("backup", "original")
                if backup.get("winner") == "backup"
                else ("original", "backup")
            )
            copies = [
                (won, branch.get("transitions") or []),
                (lost, backup.get("other_transitions") or []),
            ]
        for copy, transitions in copies:
            made += _branch(tracer, trace_id, root, parent_ctx, branch, transitions, copy, content)
    _status(run, trace.get("status") == "failed", trace.get("reason") or "")
    run.end(end_time=_ns(ended))
    return made


def _run_window(trace: TraceRecord) -> tuple[float, float]:
    """When the run's span starts and ends: its branches' first and last moments, at least its
    duration apart."""
    moments = [t["at"] for b in trace.get("branches", []) for t in b.get("transitions") or []]
    started = min(moments) if moments else 0.0
    duration = (trace.get("duration_ms") or 0) / 1000
    ended = max([*moments, started + duration]) if moments else started + duration
    return started, ended


def _run_attributes(trace: TraceRecord, content: bool) -> dict[str, Any]:
    """The run span's attributes: what the run was, how it ended, and its branches' tokens
    summed."""
    branches = trace.get("branches", [])
    tokens = [b.get("tokens") or {} for b in branches]
    return {
        "parallax.trace_id": trace["trace_id"],
        "parallax.mode": trace.get("mode"),
        "parallax.status": trace.get("status"),
        "parallax.confidence": trace.get("confidence"),
        "parallax.reason": trace.get("reason") or None,
        "parallax.tenant": trace.get("tenant"),
        "parallax.thread_id": trace.get("thread_id"),
        "parallax.playbook": trace.get("playbook"),
        "parallax.playbook_version": trace.get("playbook_version"),
        "parallax.branches": len(branches),
        "gen_ai.usage.input_tokens": sum(int(t.get("prompt") or 0) for t in tokens),
        "gen_ai.usage.output_tokens": sum(int(t.get("completion") or 0) for t in tokens),
        "parallax.answer": (trace.get("answer") or None) if content else None,
    }


def _task_spans(
    tracer: Tracer, trace_id: int, trace: TraceRecord, parents: dict[Any, OtelContext]
) -> int:
    """A span per started plan task, under the run's span; each task's context added to `parents`
    (by task id and round) for its branches. The spans made."""
    root, made = trace["trace_id"], 0
    for task in trace.get("tasks") or []:
        if not task.get("started_at"):
            continue
        key = f"task-{task['id']}-{task.get('round', 0)}"
        span = _start(
            tracer,
            "parallax.task",
            (trace_id, _id(root, key)),
            parents[None],
            task["started_at"],
            {
                "parallax.trace_id": root,
                "parallax.task": task["id"],
                "parallax.round": task.get("round", 0),
                "parallax.status": task.get("status"),
                "parallax.kind": task.get("kind"),
                "parallax.deps": [int(d) for d in task.get("deps", [])],
            },
        )
        _status(span, task.get("status") == "FAILED", task.get("reason") or "")
        span.end(end_time=_ns(task.get("finished_at") or task["started_at"]))
        parents[(task["id"], task.get("round", 0))] = _child(span)
        made += 1
    return made


def parent_from(carrier: dict[str, str] | None) -> OtelContext | None:
    """The caller's context from W3C headers (`traceparent`, `tracestate`), else the current one (a
    Python API call made inside the caller's own span), else None."""
    if not enabled() or not _sdk_installed():
        return None
    from opentelemetry import context, trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if carrier and carrier.get("traceparent"):
        return TraceContextTextMapPropagator().extract(carrier)
    current = context.get_current()
    return current if trace.get_current_span(current).get_span_context().is_valid else None
