"""A vote on objects, field by field.

See docs/internals/votes.md#votes-on-objects-field-by-field.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from parallax.logic.user_schema import get_at, join, normal, properties, required, set_at, shape
from parallax.logic.vote import quorum
from parallax.state.records import JsonSchema, Provenance


@dataclass
class FieldTally:
    path: str
    required: bool
    counts: dict[str, int]
    """Normalised value -> votes."""
    value: Any = None
    support: int = 0
    settled: bool = False
    branch_ids: list[str] = field(default_factory=list)
    """The votes that gave the settled value (or the leading one)."""

    def report(self, asked: int) -> dict[str, Any]:
        return {
            "path": self.path,
            "required": self.required,
            "settled": self.settled,
            "value": self.value,
            "support": self.support,
            "asked": asked,
            "counts": self.counts,
        }


@dataclass
class FieldVote:
    data: dict[str, Any]
    tallies: list[FieldTally]
    asked: int
    quorum: int

    @property
    def unsettled_required(self) -> list[str]:
        return [t.path for t in self.tallies if t.required and not t.settled]

    @property
    def unsettled_optional(self) -> list[str]:
        return [t.path for t in self.tallies if not t.required and not t.settled and t.counts]

    @property
    def weighed(self) -> list[FieldTally]:
        """The fields an answer is judged by: each required field, or, when none is required, each
        field some vote gave."""
        return [t for t in self.tallies if t.required] or [t for t in self.tallies if t.counts]

    @property
    def unit_counts(self) -> list[list[int]]:
        """The vote counts of what must settle before an adaptive vote stops (logic/stopping.py
        `decide_units`)."""
        return [list(t.counts.values()) for t in self.weighed]

    @property
    def confidence(self) -> float:
        weighed = self.weighed
        return (
            round(min(t.support for t in weighed) / self.asked, 3)
            if weighed and self.asked
            else 0.0
        )

    def provenance(self) -> list[Provenance]:
        """One record per settled field: the first vote that gave it, `verified` = its quorum was
        met."""
        return [
            {
                "path": t.path,
                "value": t.value,
                "branch_id": t.branch_ids[0] if t.branch_ids else None,
                "quote": None,
                "page": None,
                "verified": t.settled,
                "support": t.support,
                "asked": self.asked,
            }
            for t in self.tallies
            if t.settled
        ]


def vote_units(
    schema: JsonSchema, path: str = "", parent_required: bool = True
) -> list[tuple[str, bool]]:
    """(path, required) of each unit a vote counts: single values and whole lists, inside nested
    objects."""
    units: list[tuple[str, bool]] = []
    needed = required(schema)
    for name, sub in properties(schema).items():
        here, is_required = join(path, name), parent_required and name in needed
        if shape(sub) == "object":
            units += vote_units(sub, here, is_required)
        else:
            units.append((here, is_required))
    return units


def vote_fields(
    schema: JsonSchema,
    replies: list[tuple[str, dict[str, Any]]],
    asked: int,
    min_votes: int | None = None,
) -> FieldVote:
    """Tally `replies` ((branch id, object) of each valid vote) field by field; `asked` votes were
    asked."""
    needed = quorum(asked, min_votes)
    result = FieldVote({}, [], asked, needed)
    for path, is_required in vote_units(schema):
        given = [(branch, get_at(data, path)) for branch, data in replies]
        given = [(branch, value) for branch, value in given if value is not None]
        counts = Counter(normal(value) for _, value in given)
        ranked = counts.most_common()
        tally = FieldTally(path, is_required, dict(ranked))
        if ranked:
            top, top_count = ranked[0]
            tally.support = top_count
            tally.branch_ids = [branch for branch, value in given if normal(value) == top]
            # the spelling most of its votes used (ties: the first given), not whichever vote came
            # back first
            spellings = Counter(
                json.dumps(value, sort_keys=True) for _, value in given if normal(value) == top
            )
            tally.value = json.loads(spellings.most_common(1)[0][0])
            tally.settled = top_count >= needed and not (
                len(ranked) > 1 and ranked[1][1] == top_count
            )
            if tally.settled:
                set_at(result.data, path, tally.value)
        result.tallies.append(tally)
    return result
