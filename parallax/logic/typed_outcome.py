"""What a run with an output schema settles on, per route: the object, its provenance, its checks.

See docs/internals/runs.md#output-schemas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from parallax.logic.field_merge import collect, merge_found, missing_required, verify
from parallax.logic.field_vote import FieldVote, vote_fields
from parallax.logic.user_schema import leaves, validation_errors
from parallax.state.payloads import BranchRecord
from parallax.state.records import JsonSchema, Provenance


@dataclass
class TypedOutcome:
    data: dict[str, Any] | None
    settled: bool
    confidence: float
    notes: list[str] = field(default_factory=list)
    provenance: list[Provenance] = field(default_factory=list)
    verification: dict[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> str:
        return json.dumps(self.data, ensure_ascii=False) if self.data is not None else ""


def _names(paths: list[str]) -> str:
    return ", ".join(paths[:8]) + (f" and {len(paths) - 8} more" if len(paths) > 8 else "")


def direct_outcome(schema: JsonSchema, record: BranchRecord) -> TypedOutcome:
    data = (record.output or {}).get("data") or {}
    problems = validation_errors(schema, data)
    provenance: list[Provenance] = [
        {
            "path": path,
            "value": value,
            "branch_id": record.id,
            "quote": None,
            "page": None,
            "verified": False,
        }
        for path, value in leaves(schema, data)
    ]
    return TypedOutcome(
        data,
        not problems,
        0.5,
        [f"the object does not match the schema: {problems[0]}"] if problems else [],
        provenance,
        {"schema": {"valid": not problems, "errors": problems[:5]}},
    )


def vote_tally(
    schema: JsonSchema, ok: list[BranchRecord], asked: int, min_votes: int | None
) -> FieldVote:
    """The valid votes' objects tallied field by field, once per merge: an adaptive vote waits on
    its `unit_counts` (logic/stopping.py `decide_units`), and the vote that stops settles on it
    (`vote_outcome`).
    """
    return vote_fields(
        schema, [(r.id, (r.output or {}).get("data") or {}) for r in ok], asked, min_votes
    )


def vote_outcome(schema: JsonSchema, tally: FieldVote, valid_votes: int) -> TypedOutcome:
    """What a vote on objects settles on, from its tally (`vote_tally`) and the number of valid
    votes."""
    asked = tally.asked
    missing = tally.unsettled_required
    notes = (
        [f"no quorum ({tally.quorum} of {asked} votes) for required field(s): {_names(missing)}"]
        if missing
        else []
    )
    if tally.unsettled_optional:
        notes.append(f"left out for lack of a quorum: {_names(tally.unsettled_optional)}")
    problems = [] if missing else validation_errors(schema, tally.data)
    if problems:
        notes.append(f"the voted object does not match the schema: {problems[0]}")
    verification = {
        "rules": {
            "quorum": tally.quorum,
            "valid_votes": valid_votes,
            "asked": asked,
            "quorum_met": not missing,
            "fields": [t.report(asked) for t in tally.tallies],
        }
    }
    return TypedOutcome(
        tally.data,
        not missing and not problems,
        tally.confidence,
        notes,
        tally.provenance(),
        verification,
    )


def _conflict(conflict: dict[str, Any]) -> str:
    """One field's conflicting values as a note says them: each with the pages it was found on."""
    return f"{conflict['path']}: " + " vs ".join(
        f"{v['value']!r}" + (f" (page {', '.join(map(str, v['pages']))})" if v["pages"] else "")
        for v in conflict["values"]
    )


def section_outcome(
    schema: JsonSchema,
    ok: list[BranchRecord],
    slices: list[str],
    slice_pages: list[list[int]],
    pages: list[str],
) -> TypedOutcome:
    founds = []
    for record in sorted(ok, key=lambda r: r.slice_index or 0):
        output = record.output or {}
        if output.get("relevant", True):
            founds += list(
                collect(schema, output.get("data") or {}, record.slice_index or 0, record.id)
            )
    for found in founds:
        verify(found, slices, slice_pages, pages)
    merged = merge_found(founds)
    notes = []
    if merged.dropped:
        notes.append(f"{merged.dropped} of {merged.checked} values dropped: quote not in its slice")
    if merged.conflicts:
        notes.append("conflicting values on " + "; ".join(_conflict(c) for c in merged.conflicts))
    disputed = {c["path"] for c in merged.conflicts}  # left out of the data: already said above
    missing = [m for m in missing_required(schema, merged.data) if m not in disputed]
    if missing:
        notes.append(f"no verified value for required field(s): {_names(missing)}")
    problems = [] if missing or disputed else validation_errors(schema, merged.data)
    if problems:
        notes.append(f"the merged object does not match the schema: {problems[0]}")
    if not merged.verified:
        notes.append(
            f"none of the {merged.checked} values verified"
            if merged.checked
            else "no part of the input gave a value"
        )
    settled = bool(merged.verified) and not merged.conflicts and not missing and not problems
    confidence = round(merged.verified / merged.checked, 3) if merged.checked else 0.0
    return TypedOutcome(
        merged.data if merged.verified else None,
        settled,
        confidence,
        notes,
        merged.provenance,
        {"facts": merged.report()},
    )
