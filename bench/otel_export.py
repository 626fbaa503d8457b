"""What OpenTelemetry export costs a wide fan-out, and whether every span arrives.

The solve graph runs a vote of N branches (a model that only sleeps, as in bench.fanout) with a
store, so its trace is recorded, twice per repeat: export off, then export on, sending over
OTLP/HTTP to a receiver on loopback in this process's own thread (it decodes each request and counts
its spans, as a collector would). Export is one batch per run made from the stored trace
(runtime/telemetry.py), so the cost to compare is CPU per branch with it on against off, in the same
process; `spans_expected` is what the stored trace says (a run span, a span per branch, a span per
model call), `spans_received` what the receiver decoded once the exporter was flushed. Two figures,
since the spans are made and encoded on the exporter's own thread after the run has handed its trace
over: the run's own wall time per branch (what a caller waits), and the process's CPU per branch
including that thread's work (what a replica spends).

Prints one JSON object; progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import uuid
from pathlib import Path

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.memory import InMemoryStore

from bench.fanout import TASK, Timer, log
from parallax.graphs.solve import builder as solve_builder
from parallax.runtime import telemetry
from parallax.runtime.settings import reload_settings
from parallax.runtime.startup import freeze_startup_objects
from parallax.state.context import Context
from testkit.sleeping_model import sleeping

RECEIVER = """
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

counts = {"spans": 0, "requests": 0}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        counts["spans"] += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        counts["requests"] += 1
        self.send_response(200)
        self.end_headers()

    def do_GET(self):
        body = ("%(spans)d %(requests)d" % counts).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


class Receiver:
    """An OTLP/HTTP trace receiver in a process of its own (its decoding is not Parallax's CPU), on
    a free loopback port, that counts the spans it decoded; `GET /` answers "<spans> <requests>"."""

    def __init__(self) -> None:
        import subprocess
        import sys

        self.process = subprocess.Popen(
            [sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.url = f"http://127.0.0.1:{self.process.stdout.readline().strip()}"

    def counts(self) -> tuple[int, int]:
        import urllib.request

        with urllib.request.urlopen(self.url, timeout=30) as answer:
            spans, requests = answer.read().decode().split()
        return int(spans), int(requests)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def expected_spans(out: dict) -> int:
    branches = out["branches"]
    calls = sum(
        1
        for b in branches
        if b["kind"] != "safety"
        for t in b["transitions"]
        if t["state"] == "IN_PROGRESS"
    )
    return 1 + len(branches) + calls


async def run(
    branches: int, latency_s: float, concurrency: int, db: Path
) -> tuple[float, float, int]:
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        await saver.setup()
        graph = solve_builder.compile(checkpointer=saver, store=InMemoryStore())
        ctx = Context(
            max_concurrency=concurrency,
            straggler_factor=3.0,
            early_stop=False,
            chat_model=sleeping(latency_s=latency_s),
        )
        with Timer() as timer:
            out = await graph.ainvoke(
                {"task": TASK, "mode": "vote", "votes": branches},
                {"configurable": {"thread_id": uuid.uuid4().hex}},
                context=ctx,
            )
    if out.get("status") != "ok" or len(out["branches"]) != branches + 1:
        raise RuntimeError(f"solve graph result is wrong: {out.get('status')} {out.get('reason')}")
    return timer.result[0], timer.result[1], expected_spans(out)


async def measure(args: argparse.Namespace, tmp: Path, receiver: Receiver) -> dict:
    latency_s, n, c = args.latency_ms / 1000, args.branches, args.concurrency
    dbs = iter(tmp / f"checkpoints-{i}.sqlite" for i in range(10**6))
    modes = {
        "off": {"OTEL_SDK_DISABLED": "true"},
        "on": {"OTEL_SDK_DISABLED": "", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url},
    }
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    wall: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    expected = 0
    for env in modes.values():  # warm-up
        os.environ.update(env)
        await run(min(n, 20), latency_s, c, next(dbs))
    telemetry.flush()
    before = receiver.counts()[0]
    for i in range(args.repeat):
        for mode, env in modes.items():
            os.environ.update(env)
            seconds, cpu_s, spans = await run(n, latency_s, c, next(dbs))
            if mode == "on":
                with Timer() as flushing:  # the batch goes out in the background; count its CPU too
                    telemetry.flush()
                cpu_s += flushing.result[1]
                expected += spans
            wall[mode].append(seconds)
            cpu[mode].append(cpu_s)
        log(
            f"repeat {i + 1}/{args.repeat}: off {cpu['off'][-1]:.3f} s CPU, on {cpu['on'][-1]:.3f}"
            " s CPU"
        )
    return {"wall": wall, "cpu": cpu, "expected": expected, "before": before}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m bench.otel_export", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--branches", type=int, default=1000, help="vote branches per run (default 1000)"
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=50.0,
        help="sleep of every model call in ms (default 50)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=100, help="model calls in flight (default 100)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed runs of each mode; medians reported (default 3)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PARALLAX_RESPONSE_FORMAT", "json_object_schema")
    reload_settings()
    freeze_startup_objects()
    receiver = Receiver()
    with tempfile.TemporaryDirectory(prefix="parallax-otel-") as tmp:
        measured = asyncio.run(measure(args, Path(tmp), receiver))
    telemetry.flush()
    spans, requests = receiver.counts()
    receiver.stop()
    spans -= measured["before"]
    off, on = (statistics.median(measured["cpu"][m]) / args.branches * 1000 for m in ("off", "on"))
    wall_off, wall_on = (
        statistics.median(measured["wall"][m]) / args.branches * 1000 for m in ("off", "on")
    )
    result = {
        "benchmark": "otel_export",
        "branches": args.branches,
        "latency_ms": args.latency_ms,
        "concurrency": args.concurrency,
        "repeat": args.repeat,
        "wall_s": {m: round(statistics.median(v), 3) for m, v in measured["wall"].items()},
        "run_wall_ms_per_branch": {"off": round(wall_off, 4), "on": round(wall_on, 4)},
        "run_wall_overhead_share": round(wall_on / wall_off - 1, 4),
        "cpu_ms_per_branch": {"off": round(off, 4), "on": round(on, 4)},
        "cpu_overhead_share": round(on / off - 1, 4),
        "spans_expected": measured["expected"],
        "spans_received": spans,
        "export_requests": requests,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "goals_met": {
            "run_wall_overhead_le_10pct": wall_on <= wall_off * 1.10,
            "no_lost_spans": spans == measured["expected"],
        },
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
