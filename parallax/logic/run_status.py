"""A run's final status: `ok` only when its checks passed, else `needs_review` with the reasons."""

from __future__ import annotations

from parallax.state.payloads import BranchRecord


def safety_reasons(records: list[BranchRecord]) -> list[str]:
    return [
        r
        for rec in records
        if rec.kind == "safety" and rec.output
        for r in rec.output.get("reasons", [])
    ]


def final_status(
    records: list[BranchRecord],
    settled: bool,
    confidence: float | None = None,
    ok_confidence: float = 0.0,
) -> tuple[str, str]:
    """`ok` only when nothing was flagged, the answer settled and its `confidence` reaches
    `ok_confidence` (PARALLAX_OK_CONFIDENCE); else `needs_review` with why (the caller adds the
    merge's own notes).
    """
    reasons = safety_reasons(records)
    if reasons:
        return "needs_review", "safety: " + "; ".join(reasons)
    if not settled:
        return "needs_review", ""
    if confidence is not None and confidence < ok_confidence:
        return (
            "needs_review",
            (
                f"confidence {confidence:.2f} is below the {ok_confidence:g} an ok needs"
                " (PARALLAX_OK_CONFIDENCE)"
            ),
        )
    return "ok", ""
