"""Why a run failed, and how many failed for each reason: what a batch of runs reports."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from parallax.state.vocabulary import BUSINESS

ERROR_CHARS = 500


def run_failure(run: Mapping[str, Any]) -> dict[str, str] | None:
    """{"cause", "error"} of a run that ended `failed`; None for any other run."""
    if run.get("status") != "failed":
        return None
    if run.get("cause"):
        cause = run["cause"]
    else:
        causes = Counter(
            b.get("cause") or "crash"
            for b in run.get("branches", [])
            if b.get("kind") in BUSINESS and b.get("status") != "ok"
        )
        cause = causes.most_common(1)[0][0] if causes else "crash"
    error = run.get("error") or run.get("reason") or "the run failed without saying why"
    return {"cause": cause, "error": str(error)[:ERROR_CHARS]}


def failures_by_cause(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many of `rows` (result lines with a `cause` when they failed) failed for each cause, most
    first."""
    return dict(Counter(r["cause"] for r in rows if r.get("cause")).most_common())
