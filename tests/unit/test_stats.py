"""`parallax stats` on a fixture of traces whose figures are worked out by hand, and the `stats`
graph."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.data_loop import stats_builder
from parallax.graphs.solve import builder as solve_builder
from parallax.logic.run_stats import parse_since, percentile, run_stats
from parallax.runtime.storage.stores import open_sqlite_store, traces_in
from testkit.scripted_model import scripted

runner = CliRunner()
NOW = datetime.now(UTC)


def branch(
    kind: str, status: str = "ok", attempts: int = 1, reasks: int = 0, tokens: int = 0, **extra
) -> dict:
    return {
        "id": f"{kind}-{id(extra)}-{attempts}-{tokens}",
        "kind": kind,
        "status": status,
        "attempts": attempts,
        "reasks": reasks,
        "tokens": {"total": tokens},
        "transitions": [],
        **extra,
    }


SAFETY = branch("safety", attempts=0)


def trace(
    n: int,
    version: int,
    status: str,
    branches: list[dict],
    duration: float,
    correct: bool | None = None,
    feedback: list[float] = (),
    days_ago: float = 0,
) -> dict:
    t = {
        "trace_id": f"t{n}",
        "tenant": "default",
        "created_at": (NOW - timedelta(days=days_ago)).isoformat(),
        "playbook": "fin",
        "playbook_version": version,
        "status": status,
        "mode": "direct",
        "answer": "",
        "branches": [*branches, SAFETY],
        "duration_ms": duration,
        "feedback": [{"score": s, "comment": "", "by": "x"} for s in feedback],
    }
    if correct is not None:
        t.update(target="4", correct=correct)
    return t


FIXTURE = [
    # v1: right; no fault; 1 call, 100 tokens; feedback 0 then 1 (latest counts: 1.0)
    trace(
        1,
        1,
        "ok",
        [branch("direct", tokens=100, cost_usd=0.001)],
        100,
        correct=True,
        feedback=[0.0, 1.0],
    ),
    # v1: wrong but ok; three votes, one retried (a fault it recovered from); 4 calls, 150 tokens
    trace(
        2,
        1,
        "ok",
        [
            branch("vote", tokens=50, cost_usd=0.0005),
            branch("vote", attempts=2, tokens=50, cost_usd=0.0005),
            branch("vote", tokens=50, cost_usd=0.0005),
        ],
        300,
        correct=False,
    ),
    # v1: no target; a re-ask (a fault) and still needs_review; 2 calls, 80 tokens; feedback 0; its
    # model has no price (no cost_usd): its cost is unknown, not 0
    trace(
        3,
        1,
        "needs_review",
        [branch("direct", attempts=2, reasks=1, tokens=80)],
        200,
        feedback=[0.0],
    ),
    # v2: failed after 3 attempts; no tokens
    trace(4, 2, "failed", [branch("direct", status="failed", attempts=3)], 900),
    # v2: right, a straggler backup raced it (a fault, recovered); 30 days old
    trace(
        5,
        2,
        "ok",
        [branch("direct", tokens=60, cost_usd=0.0006, backup={"winner": "original"})],
        400,
        correct=True,
        days_ago=30,
    ),
]

OVERALL = {
    "runs": 5,
    "ok_rate": 0.6,
    "accuracy": 0.6667,
    "accuracy_runs": 3,
    "mean_branches": 1.4,
    "mean_model_calls": 2.2,
    "runs_with_faults": 4,
    "recovery_rate": 0.5,
    "latency_ms_p50": 300.0,
    "latency_ms_p95": 900.0,
    "tokens_total": 390,
    "tokens_mean": 78.0,
    "feedback_mean": 0.5,
    "feedback_runs": 2,
    "cost_usd_total": 0.0031,
    "cost_usd_mean": 0.000775,
    "cost_unknown_runs": 1,
    "budget_stops": 0,
}
V1 = {
    "runs": 3,
    "ok_rate": 0.6667,
    "accuracy": 0.5,
    "accuracy_runs": 2,
    "mean_branches": 1.6667,
    "mean_model_calls": 2.3333,
    "runs_with_faults": 2,
    "recovery_rate": 0.5,
    "latency_ms_p50": 200.0,
    "latency_ms_p95": 300.0,
    "tokens_total": 330,
    "tokens_mean": 110.0,
    "feedback_mean": 0.5,
    "feedback_runs": 2,
    "cost_usd_total": 0.0025,
    "cost_usd_mean": 0.00125,
    "cost_unknown_runs": 1,
    "budget_stops": 0,
}
V2 = {
    "runs": 2,
    "ok_rate": 0.5,
    "accuracy": 1.0,
    "accuracy_runs": 1,
    "mean_branches": 1.0,
    "mean_model_calls": 2.0,
    "runs_with_faults": 2,
    "recovery_rate": 0.5,
    "latency_ms_p50": 400.0,
    "latency_ms_p95": 900.0,
    "tokens_total": 60,
    "tokens_mean": 30.0,
    "feedback_mean": None,
    "feedback_runs": 0,
    "cost_usd_total": 0.0006,
    "cost_usd_mean": 0.0003,
    "cost_unknown_runs": 0,
    "budget_stops": 0,
}


def test_metrics_match_the_hand_computed_figures():
    result = run_stats(FIXTURE)
    assert result["overall"] == OVERALL
    assert result["by_version"] == [
        {"playbook": "fin", "version": 1, **V1},
        {"playbook": "fin", "version": 2, **V2},
    ]


def test_filters_by_time_and_version():
    assert run_stats(FIXTURE, since=parse_since("7d"))["overall"]["runs"] == 4
    assert run_stats(FIXTURE, version=2)["overall"]["runs"] == 2
    assert run_stats(FIXTURE, playbook="other")["overall"]["runs"] == 0
    assert percentile([5, 1, 3], 50) == 3 and percentile([], 50) is None


async def store_fixture(store) -> None:
    traces = traces_in(store)
    for t in FIXTURE:
        await traces.put_trace(t)


def test_cli_stats_json_table_and_plot(tmp_path):
    async def main():
        async with open_sqlite_store() as store:
            await store_fixture(store)

    asyncio.run(main())
    out = runner.invoke(app, ["stats", "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["overall"] == OVERALL and [r["version"] for r in result["by_version"]] == [1, 2]
    assert (
        json.loads(
            runner.invoke(app, ["stats", "--since", "7d", "--version", "1", "--json"]).output
        )["overall"]
        == V1
    )
    table = runner.invoke(app, ["stats"], env={"COLUMNS": "80"})
    cells = [
        re.split(r"\s{2,}", line.strip()) for line in table.output.splitlines()
    ]  # columns: 2+ spaces apart
    rows = {c[0]: c[1:] for c in cells if len(c) == 4}
    assert rows["accuracy (runs with a target)"] == ["50.0%", "100.0%", "66.7%"]  # v1, v2, all
    assert (
        rows["branches per run"][0] == "1.67"
        and rows["p95 latency ms"][2] == "900"
        and rows["runs"] == ["3", "2", "5"]
    )
    png = tmp_path / "stats.png"
    assert runner.invoke(app, ["stats", "--plot", str(png)]).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--since", "yesterday"], "bad --since"),
        (["--plot", "x.jpg"], "must end in .png"),
        (["--tenant", "../x"], "bad tenant"),
    ],
)
def test_cli_stats_bad_input_is_one_line_exit_2(args, message):
    out = runner.invoke(app, ["stats", *args])
    assert (
        out.exit_code == 2 and message in out.output and len(out.output.strip().splitlines()) == 1
    )


async def test_the_stats_graph_returns_the_same_figures():
    store = InMemoryStore()
    await store_fixture(store)
    out = await stats_builder.compile(store=store).ainvoke({"tenant": "default"})
    assert out["overall"] == OVERALL and out["by_version"][1]["latency_ms_p95"] == 900.0


async def test_solve_runs_leave_what_stats_needs():
    """Real solve runs: duration, target verdict, model calls, retries seen as faults."""
    calls = {"n": 0}

    def script(prompt, t, i):
        calls["n"] += 1
        if calls["n"] == 1:
            return "not json at all"  # a re-ask: a fault the run recovers from
        return json.dumps({"reasoning": "r", "answer": "4"})

    ctx, _ = scripted(script)
    store = InMemoryStore()
    graph = solve_builder.compile(store=store)
    await graph.ainvoke({"task": "What is 2 + 2?", "mode": "direct", "target": "4"}, context=ctx)
    await graph.ainvoke({"task": "What is 2 + 3?", "mode": "direct", "target": "6"}, context=ctx)
    result = run_stats(await traces_in(store).traces())["overall"]
    assert result["runs"] == 2 and result["accuracy"] == 0.5 and result["ok_rate"] == 1.0
    assert result["runs_with_faults"] == 1 and result["recovery_rate"] == 1.0
    assert result["mean_model_calls"] == 1.5 and result["latency_ms_p50"] is not None
