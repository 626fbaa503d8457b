"""Branch outputs merged into one validated answer, with explicit degrade paths.

Every record is validated before use; what was checked is reported in `verification`
(docs/how-it-works.md).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.branch_plans import adaptive, waves_of
from parallax.logic.budget import BUDGET_CAUSE, state_reached
from parallax.logic.field_vote import FieldVote
from parallax.logic.quotes import FactCheck, check_findings
from parallax.logic.routing import votes_of
from parallax.logic.run_status import final_status
from parallax.logic.stopping import decide_units
from parallax.logic.typed_outcome import direct_outcome, section_outcome, vote_outcome, vote_tally
from parallax.logic.vote import final_value, normalize_answer, quorum, quorum_shortfall, tally_values
from parallax.logic.vote_pricing import remember_vote, vote_model
from parallax.runtime.run_context import context_of
from parallax.runtime.services import services_of
from parallax.state.context import Context, setting
from parallax.state.payloads import BUSINESS, Answer, BranchRecord, SliceFinding
from parallax.state.records import JsonSchema
from parallax.state.solve import SolveState


def _check_sections(ok: list[BranchRecord], slices: list[str]) -> tuple[FactCheck, int]:
    """Findings of the relevant slices checked against their own slice; and how many slices were relevant."""
    findings, relevant = [], 0
    for record in sorted(ok, key=lambda r: r.slice_index or 0):
        finding = SliceFinding.model_validate(record.output)
        if finding.relevant:
            relevant += 1
            findings += [(record.slice_index or 0, p.point, p.quote) for p in finding.points]
    return check_findings(findings, slices), relevant


def _assemble_sections(facts: FactCheck) -> str:
    """Verified points in input order, duplicates (same normalised text) dropped."""
    seen: set[str] = set()
    lines: list[str] = []
    for kept in facts.kept:
        key = normalize_answer(kept["point"])
        if key and key not in seen:
            seen.add(key)
            lines.append(f"- {kept['point']}")
    return "\n".join(lines)


async def merge(state: SolveState, runtime: Runtime[Context]) -> dict[str, Any]:
    if state["mode"] == "speculate":
        return {}  # the candidates are verified and picked by nodes/pick.py
    ctx = context_of(runtime)
    records = [BranchRecord.model_validate(r) for r in state.get("branches", [])]
    business = [r for r in records if r.kind in BUSINESS and r.status != "cancelled"]
    # a vote whose answer reduces to no value ("...", "**") is no vote: counted neither for '' nor as valid
    blank = {r.id for r in business if r.status == "ok" and r.kind == "vote" and r.vote == ""}
    ok = [r for r in business if r.status == "ok" and r.id not in blank]
    failed = [r.id for r in business if r.status != "ok"]
    partial = "; ".join(x for x in (f"{len(failed)} of {len(business)} branches failed" if failed else "",
                                    f"{len(blank)} of {len(business)} votes gave no value to count" if blank else "") if x)
    asked: dict[str, Any] = {"votes_asked": len(business), "next_wave": 0} if state["mode"] == "vote" else {}
    refused = [r.error for r in records if r.kind in BUSINESS and r.cause == BUDGET_CAUSE and r.error]
    if not business and refused:  # the run's budget let none ask: nothing failed, there is only nothing to show
        return {"status": "needs_review", "answer": "", "data": None, "provenance": [], "confidence": 0.0,
                "vote_counts": {}, "failed_branches": [], **asked, "consensus": False, "reason": refused[0],
                **({"stop_reason": refused[0]} if asked else {})}
    if not ok:
        errors = "; ".join(sorted({r.error or ("no value to count" if r.id in blank else r.status) for r in business}))[:500]
        return {"status": "failed", "answer": "", "data": None, "provenance": [], "confidence": 0.0, "vote_counts": {},
                "failed_branches": failed, **asked, "stop_reason": "every vote asked failed" if asked else "",
                "consensus": False, "reason": f"all {len(business)} branches failed: {errors}"}

    route = state["mode"]
    schema = state.get("output_schema")
    min_votes = state.get("min_votes")
    # a vote on objects is tallied once: what it waits on to stop and what it settles on
    fields = vote_tally(schema, ok, len(business), min_votes) if schema is not None and route == "vote" else None
    if adaptive(state, ctx):
        units = fields.unit_counts if fields is not None else [list(Counter(r.vote for r in ok).values())]
        first, least = waves_of(state, ctx)
        decision = decide_units(units, len(business), votes_of(state), threshold=setting(ctx.vote_stop_threshold),
                                first_wave=first, min_wave=least, min_leader=min_votes or 0)
        withheld = None if decision.stop else state_reached(state, services_of(ctx))
        if not decision.stop and not withheld:  # another wave (graphs/solve.py sends it), then this merge again
            return {**asked, "next_wave": decision.next_wave}
        stop = decision.reason if withheld is None else f"{withheld}: the next wave was not asked"
        if withheld is not None:
            asked["budget_stop"] = stop
    else:
        stop = "all of them: early stopping off"
    if route == "vote":  # its counts and reply sizes price the plans of the model's next votes
        remember_vote(services_of(ctx), vote_model(ctx), state.get("branches") or [])
    if schema is not None:
        return {**_typed(state, schema, records, ok, fields, failed, partial, setting(ctx.ok_confidence)), **asked,
                **({"stop_reason": stop} if asked else {})}
    votes: dict[str, int] = {}
    verification: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    settled = True
    if route == "vote":
        # each vote's final value was worked out when it came back (nodes/work.py); a record without one, its answer's
        values = [r.vote if r.vote is not None else final_value(Answer.model_validate(r.output).answer) for r in ok]
        shortfall = quorum_shortfall(len(ok), len(business), min_votes)
        winner, votes = tally_values(values, quorum(len(business), min_votes))
        winner = None if shortfall else winner
        leader = winner or next(iter(votes))
        answer = next(Answer.model_validate(r.output).answer.strip() for r in ok if r.vote == leader)
        confidence = votes[leader] / len(ok)  # the answer's support among the valid votes
        settled = winner is not None
        note = shortfall or ("" if settled else f"no answer reached {quorum(len(business), min_votes)} of {len(business)} votes")
        verification["rules"] = {"quorum": quorum(len(business), min_votes), "valid_votes": len(ok),
                                 "asked": len(business), "quorum_met": not shortfall}
        extra = {**asked, "stop_reason": stop}
    elif route == "section":
        facts, relevant = _check_sections(ok, state.get("slices") or [])
        answer = _assemble_sections(facts)
        settled = bool(answer)
        confidence = len(facts.kept) / facts.checked if facts.checked else 0.0  # never 1.0 for nothing checked
        verification["facts"] = facts.report()
        if facts.checked and not facts.kept:
            note = f"none of the {facts.checked} findings quoted its slice: nothing verified"
        elif not settled:
            note = "no part of the input answered the question"
        else:
            note = f"{len(facts.dropped)} of {facts.checked} findings dropped: quote not in its slice" if facts.dropped else ""
    else:
        answer = Answer.model_validate(ok[0].output).answer.strip()
        confidence = 0.5  # one unchecked answer
        note = ""
    status, why = final_status(records, settled, confidence, setting(ctx.ok_confidence))
    return {"answer": answer, "vote_counts": votes, "confidence": round(confidence, 3), "failed_branches": failed,
            "consensus": settled, "status": status, "verification": verification, **extra,
            "reason": "; ".join(x for x in (why, note, partial) if x)}


def _typed(state: SolveState, schema: JsonSchema, records: list[BranchRecord], ok: list[BranchRecord],
           fields: FieldVote | None, failed: list[str], partial: str, ok_confidence: float) -> dict[str, Any]:
    """A run with an output schema: the object its route settles on (logic/typed_outcome.py); `fields`: a vote's
    tally (`vote_tally`)."""
    route = state["mode"]
    if fields is not None:
        outcome = vote_outcome(schema, fields, len(ok))
    elif route == "section":
        outcome = section_outcome(schema, ok, state.get("slices") or [], state.get("slice_pages") or [],
                                  state.get("pages") or [])
    else:
        outcome = direct_outcome(schema, ok[0])
    status, why = final_status(records, outcome.settled, outcome.confidence, ok_confidence)
    return {"answer": outcome.answer, "data": outcome.data, "provenance": outcome.provenance, "vote_counts": {},
            "confidence": outcome.confidence, "failed_branches": failed, "consensus": outcome.settled, "status": status,
            "verification": outcome.verification, "reason": "; ".join(x for x in (why, *outcome.notes, partial) if x)}
