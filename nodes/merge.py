"""Merge branch outputs into one validated answer, with explicit degrade paths.

Every record is validated against its pydantic schema before use. All business
branches failed -> `failed` with their errors; some failed -> merge the rest and name
the failed ones; votes without a clear winner -> the judge decides (see `judge.py`);
a safety flag -> `needs_review` with its reasons, whatever the answer.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from parallax.logic.run_status import final_status
from parallax.logic.vote import normalize_answer, strict_majority, tally
from parallax.state.context import Context
from parallax.state.payloads import BUSINESS, Answer, BranchRecord, SliceFinding
from parallax.state.solve import SolveState


def _assemble_sections(ok: list[BranchRecord]) -> tuple[str, int]:
    """Points in input order, duplicates (same normalised text) dropped."""
    seen: set[str] = set()
    lines: list[str] = []
    relevant = 0
    for record in sorted(ok, key=lambda r: r.slice_index or 0):
        finding = SliceFinding.model_validate(record.output)
        if not finding.relevant:
            continue
        relevant += 1
        for point in finding.points:
            key = normalize_answer(point)
            if key and key not in seen:
                seen.add(key)
                lines.append(f"- {point.strip()}")
    return "\n".join(lines), relevant


def merge(state: SolveState, runtime: Runtime[Context]) -> dict:
    records = [BranchRecord.model_validate(r) for r in state.get("branches", [])]
    business = [r for r in records if r.kind in BUSINESS]
    ok = [r for r in business if r.status == "ok"]
    failed = [r.id for r in business if r.status != "ok"]
    partial = f"{len(failed)} of {len(business)} branches failed" if failed else ""
    if not ok:
        errors = "; ".join(sorted({r.error or r.status for r in business}))[:500]
        return {"status": "failed", "answer": "", "confidence": 0.0, "votes": {}, "failed_branches": failed,
                "consensus": False, "reason": f"all {len(business)} branches failed: {errors}"}

    route = state["mode"]
    votes: dict[str, int] = {}
    settled = True
    if route == "vote":
        min_votes = state.get("min_votes") or strict_majority(len(business))
        winner, votes = tally([Answer.model_validate(r.output).answer for r in ok], min_votes)
        settled = winner is not None
        leader = winner or next(iter(votes))
        answer = next(Answer.model_validate(r.output).answer.strip() for r in ok if r.vote == leader)
        confidence = votes[leader] / len(business)
        note = "" if settled else f"no answer reached {min_votes} of {len(business)} votes"
    elif route == "section":
        answer, relevant = _assemble_sections(ok)
        settled = bool(answer)
        confidence = len(ok) / len(business)
        note = "" if settled else "no part of the input answered the question"
    else:
        answer = Answer.model_validate(ok[0].output).answer.strip()
        confidence = 0.5  # one unchecked answer
        note = ""
    status, why = final_status(records, settled)
    return {"answer": answer, "votes": votes, "confidence": round(confidence, 3), "failed_branches": failed,
            "consensus": settled, "status": status, "reason": "; ".join(x for x in (why, note, partial) if x)}
