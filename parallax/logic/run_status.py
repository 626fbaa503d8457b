"""A run's final status: `ok` only when its checks passed, else `needs_review` with the reasons.

`ok` is a promise to the user. A safety flag holds any answer for review, whatever the
branches agreed; an answer that was not settled (no quorum, nothing relevant found) is
never `ok` either. Used by the merge and by the judge.
"""

from __future__ import annotations

from parallax.state.payloads import BranchRecord


def safety_reasons(records: list[BranchRecord]) -> list[str]:
    return [r for rec in records if rec.kind == "safety" and rec.output for r in rec.output.get("reasons", [])]


def final_status(records: list[BranchRecord], settled: bool) -> tuple[str, str]:
    reasons = safety_reasons(records)
    if reasons:
        return "needs_review", "safety: " + "; ".join(reasons)
    return ("ok", "") if settled else ("needs_review", "")
