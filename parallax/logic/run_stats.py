"""Run metrics from stored traces: `parallax stats` and the `stats` graph.

See docs/data-loop.md (stats) and docs/internals/runs.md#the-trace.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TypedDict

from parallax.logic.run_record import latest_score
from parallax.logic.spend import spend_of
from parallax.state.trace_record import TraceRecord
from parallax.state.vocabulary import BUSINESS

SINCE = re.compile(r"^(\d+)\s*([mhdw])$")
UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
FAULT_STATES = {"FAILED", "TIMEOUT", "RETRY"}


class RunMetrics(TypedDict):
    """The metrics of one group of runs (docs/data-loop.md lists them)."""

    runs: int
    ok_rate: float | None
    accuracy: float | None
    accuracy_runs: int
    mean_branches: float | None
    mean_model_calls: float | None
    runs_with_faults: int
    recovery_rate: float | None
    latency_ms_p50: float | None
    latency_ms_p95: float | None
    tokens_total: int
    tokens_mean: float | None
    cost_usd_total: float | None
    cost_usd_mean: float | None
    cost_unknown_runs: int
    budget_stops: int
    feedback_mean: float | None
    feedback_runs: int


class VersionMetrics(RunMetrics):
    """The metrics of the runs one playbook version served."""

    playbook: str
    version: int


class Filters(TypedDict):
    since: str | None
    playbook: str | None
    version: int | None


class RunStats(TypedDict):
    """What `parallax stats` and the `stats` graph report."""

    filters: Filters
    overall: RunMetrics
    by_version: list[VersionMetrics]


class BadFilter(ValueError):
    """A filter that cannot be read; the message says what to give instead."""


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """ "7d", "12h", "30m", "2w" back from now, or an ISO date/time; None for no limit."""
    if not text:
        return None
    now = now or datetime.now(UTC)
    if m := SINCE.match(text.strip().lower()):
        return now - timedelta(**{UNITS[m.group(2)]: int(m.group(1))})
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadFilter(
            f"bad --since {text!r}: use e.g. 7d, 12h, 30m, 2w or a date such as 2026-01-31"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least p% of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def model_calls(trace: TraceRecord) -> int:
    return sum(b.get("attempts", 0) for b in trace.get("branches", []) if b["kind"] != "safety")


def met_fault(trace: TraceRecord) -> bool:
    """A fault, retry, re-ask or straggler backup anywhere in the run."""
    for b in trace.get("branches", []):
        if b["kind"] == "safety":
            continue
        if (
            b.get("attempts", 1) > 1
            or b.get("reasks", 0) > 0
            or b.get("backup")
            or b.get("status") != "ok"
            or any(t["state"] in FAULT_STATES for t in b.get("transitions", []))
        ):
            return True
    return False


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarize(traces: list[TraceRecord]) -> RunMetrics:
    """The metrics of one group of runs (docs/data-loop.md lists them)."""
    scored = [t for t in traces if t.get("correct") is not None]
    faulty = [t for t in traces if met_fault(t)]
    durations = [float(d) for t in traces if (d := t.get("duration_ms")) is not None]
    tokens = [
        sum(b.get("tokens", {}).get("total", 0) for b in t.get("branches", [])) for t in traces
    ]
    costs = [spend_of(t.get("branches", []))["cost_usd"] for t in traces]
    known = [c for c in costs if c is not None]
    cost_mean = round(sum(known) / len(known), 8) if known else None
    feedback = [s for t in traces if (s := latest_score(t)) is not None]
    return {
        "runs": len(traces),
        "ok_rate": _share(sum(t.get("status") == "ok" for t in traces), len(traces)),
        "accuracy": _share(sum(bool(t["correct"]) for t in scored), len(scored)),
        "accuracy_runs": len(scored),
        "mean_branches": _mean(
            [sum(b["kind"] in BUSINESS for b in t.get("branches", [])) for t in traces]
        ),
        "mean_model_calls": _mean([model_calls(t) for t in traces]),
        "runs_with_faults": len(faulty),
        "recovery_rate": _share(sum(t.get("status") == "ok" for t in faulty), len(faulty)),
        "latency_ms_p50": percentile(durations, 50),
        "latency_ms_p95": percentile(durations, 95),
        "tokens_total": sum(tokens),
        "tokens_mean": _mean(tokens),
        "cost_usd_total": round(sum(known), 6) if known else None,
        "cost_usd_mean": cost_mean,
        "cost_unknown_runs": len(costs) - len(known),
        "budget_stops": sum(
            str(t.get("reason") or "").startswith("budget reached") for t in traces
        ),
        "feedback_mean": _mean(feedback),
        "feedback_runs": len(feedback),
    }


def select(
    traces: list[TraceRecord],
    since: datetime | None = None,
    playbook: str | None = None,
    version: int | None = None,
) -> list[TraceRecord]:
    def keep(t: TraceRecord) -> bool:
        if (
            since is not None
            and datetime.fromisoformat(t.get("created_at") or "1970-01-01T00:00:00+00:00") < since
        ):
            return False
        if playbook is not None and t.get("playbook", "default") != playbook:
            return False
        return version is None or t.get("playbook_version", 0) == version

    return [t for t in traces if keep(t)]


def run_stats(
    traces: list[TraceRecord],
    since: datetime | None = None,
    playbook: str | None = None,
    version: int | None = None,
) -> RunStats:
    """{"overall": metrics, "by_version": [{"playbook", "version", **metrics}, ...]} of the selected
    runs."""
    chosen = select(traces, since, playbook, version)
    groups: dict[tuple[str, int], list[TraceRecord]] = {}
    for t in chosen:
        groups.setdefault((t.get("playbook", "default"), t.get("playbook_version", 0)), []).append(
            t
        )
    return {
        "filters": {
            "since": since.isoformat() if since else None,
            "playbook": playbook,
            "version": version,
        },
        "overall": summarize(chosen),
        "by_version": [
            {"playbook": p, "version": v, **summarize(ts)} for (p, v), ts in sorted(groups.items())
        ],
    }
