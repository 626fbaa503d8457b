"""Why a run failed, and how many failed for each reason: what a batch of runs reports.

Why: `eval` and `learn` run many tasks; a failed task whose result line has an empty answer
and no error cannot be told apart from a wrong answer, and a batch whose summary says only
"33 failed" hides whether the endpoint or the model was at fault. A failed run's
cause is the most common cause among its failed business branches (runtime/failure_cause.py),
or the one the caller gave it (`input`, `crash`); its error is the run's reason, which names
each distinct branch error.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from parallax.state.vocabulary import BUSINESS

ERROR_CHARS = 500


def run_failure(run: dict[str, Any]) -> dict[str, str] | None:
    """{"cause", "error"} of a run that ended `failed`; None for any other run."""
    if run.get("status") != "failed":
        return None
    if run.get("cause"):
        cause = run["cause"]
    else:
        causes = Counter(b.get("cause") or "crash" for b in run.get("branches", [])
                         if b.get("kind") in BUSINESS and b.get("status") != "ok")
        cause = causes.most_common(1)[0][0] if causes else "crash"
    error = run.get("error") or run.get("reason") or "the run failed without saying why"
    return {"cause": cause, "error": str(error)[:ERROR_CHARS]}


def failures_by_cause(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many of `rows` (result lines with a `cause` when they failed) failed for each cause, most first."""
    return dict(Counter(r["cause"] for r in rows if r.get("cause")).most_common())
