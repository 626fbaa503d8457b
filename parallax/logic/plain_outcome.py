"""What a run without an output schema settles on, per business kind: answer, support, checks.

- `direct`: the one branch's answer, unchecked (confidence 0.5).
- `vote`: the valid votes' final values counted against the quorum; short of it, no winner.
- `slice`: the findings whose quotes occur in their slice, in input order (logic/quotes.py); the
  confidence is the share that verified, never 1.0 for nothing checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from parallax.logic.field_vote import FieldVote
from parallax.logic.quotes import FactCheck, check_findings
from parallax.logic.vote import (
    final_value,
    normalize_answer,
    quorum,
    quorum_shortfall,
    tally_values,
)
from parallax.state.payloads import Answer, BranchRecord, SliceFinding


@dataclass(frozen=True)
class Ballot:
    """What a merge settles: the valid business records, how many were asked, the input they
    read."""

    ok: list[BranchRecord]
    asked: int
    """Business branches asked (cancelled votes not counted)."""
    min_votes: int | None = None
    slices: list[str] = field(default_factory=list)
    slice_pages: list[list[int]] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    fields: FieldVote | None = None
    """A vote on objects: its tally, made once per merge (logic/typed_outcome.py `vote_tally`)."""


@dataclass(frozen=True)
class PlainOutcome:
    answer: str
    settled: bool
    confidence: float
    note: str = ""
    votes: dict[str, int] = field(default_factory=dict)
    verification: dict[str, Any] = field(default_factory=dict)


def direct_answer(ballot: Ballot) -> PlainOutcome:
    """The one branch's answer: nothing checked it."""
    return PlainOutcome(Answer.model_validate(ballot.ok[0].output).answer.strip(), True, 0.5)


def vote_answer(ballot: Ballot) -> PlainOutcome:
    """The value that reached the quorum among the valid votes, else the leader, unsettled."""
    ok, asked, min_votes = ballot.ok, ballot.asked, ballot.min_votes
    # each vote's final value was worked out when it came back (nodes/work.py); else, its answer's
    values = [
        r.vote if r.vote is not None else final_value(Answer.model_validate(r.output).answer)
        for r in ok
    ]
    shortfall = quorum_shortfall(len(ok), asked, min_votes)
    winner, votes = tally_values(values, quorum(asked, min_votes))
    winner = None if shortfall else winner
    leader = winner or next(iter(votes))
    answer = next(Answer.model_validate(r.output).answer.strip() for r in ok if r.vote == leader)
    settled = winner is not None
    note = shortfall or (
        "" if settled else f"no answer reached {quorum(asked, min_votes)} of {asked} votes"
    )
    rules = {
        "quorum": quorum(asked, min_votes),
        "valid_votes": len(ok),
        "asked": asked,
        "quorum_met": not shortfall,
    }
    return PlainOutcome(answer, settled, votes[leader] / len(ok), note, votes, {"rules": rules})


def section_answer(ballot: Ballot) -> PlainOutcome:
    """The verified findings of the relevant slices, as a list; what failed its check is counted."""
    facts = check_sections(ballot.ok, ballot.slices)
    answer = assemble_sections(facts)
    confidence = (
        len(facts.kept) / facts.checked if facts.checked else 0.0
    )  # never 1.0 for nothing checked
    if facts.checked and not facts.kept:
        note = f"none of the {facts.checked} findings quoted its slice: nothing verified"
    elif not answer:
        note = "no part of the input answered the question"
    else:
        note = (
            f"{len(facts.dropped)} of {facts.checked} findings dropped: quote not in its slice"
            if facts.dropped
            else ""
        )
    return PlainOutcome(
        answer, bool(answer), confidence, note, verification={"facts": facts.report()}
    )


def check_sections(ok: list[BranchRecord], slices: list[str]) -> FactCheck:
    """Findings of the relevant slices checked against their own slice."""
    findings = []
    for record in sorted(ok, key=lambda r: r.slice_index or 0):
        finding = SliceFinding.model_validate(record.output)
        if finding.relevant:
            findings += [(record.slice_index or 0, p.point, p.quote) for p in finding.points]
    return check_findings(findings, slices)


def assemble_sections(facts: FactCheck) -> str:
    """Verified points in input order, duplicates (same normalised text) dropped."""
    seen: set[str] = set()
    lines: list[str] = []
    for kept in facts.kept:
        key = normalize_answer(kept["point"])
        if key and key not in seen:
            seen.add(key)
            lines.append(f"- {kept['point']}")
    return "\n".join(lines)
