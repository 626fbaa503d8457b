"""Speculate mode's decisions: each candidate's approach, and how the verifier picks one.

See docs/how-it-works.md#speculate-several-approaches-at-once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from parallax.logic.branch_kinds import spread
from parallax.prompts.solve import candidate_messages
from parallax.runtime import linear_regex
from parallax.state.context import Context, setting
from parallax.state.records import CandidateSpec, CheckSpec
from parallax.state.solve import SolveState
from parallax.state.trace_record import Match

DEFAULT_CANDIDATES = 3
DEFAULT_CHECK_FILE = "candidate.txt"
TEMPERATURE_LOW, TEMPERATURE_HIGH = 0.2, 1.0
CHECK_PASSED_CONFIDENCE = 0.9
"""A candidate whose check passed: the check is the evidence (tests can miss things, so not 1.0)."""
JUDGED_CONFIDENCE = 0.6
"""A tournament winner that won every match in both orders: a judge's consistent opinion, not a
test."""
UNCLEAR_CONFIDENCE = 0.3

APPROACHES: tuple[tuple[str, str], ...] = (
    ("straightforward", "Solve it the most direct, conventional way."),
    (
        "careful",
        (
            "First think about edge cases and what could go wrong, then solve it so that they are"
            " handled."
        ),
    ),
    ("alternative", "Deliberately take a different route from the most obvious one."),
    ("minimal", "Give the simplest answer that fully meets the task, nothing more."),
    ("thorough", "Work step by step and check each step before you give the answer."),
)
"""Prompt variants, cycled over the candidates; with more candidates than variants, temperatures
still differ."""

# A check's output is whatever the code under test prints: RE2 (linear time), not `re`, reads it.
PASSED = linear_regex.compile(r"(\d+) passed")
FAILED = linear_regex.compile(r"(\d+) (?:failed|errors?)")
RAN = linear_regex.compile(r"^Ran (\d+) tests?", multiline=True)
UNITTEST_BAD = linear_regex.compile(r"(?:failures|errors)=(\d+)")


def candidates_of(state: SolveState) -> int:
    value = state.get("candidates", DEFAULT_CANDIDATES)
    return value if isinstance(value, int) and not isinstance(value, bool) else DEFAULT_CANDIDATES


def candidate_specs(state: SolveState, ctx: Context) -> list[CandidateSpec]:
    """One spec per candidate: approach i (cycled) at the i-th temperature of the spread, on the
    run's model."""
    n = candidates_of(state)
    temperatures = spread(TEMPERATURE_LOW, TEMPERATURE_HIGH, n)
    lessons = _lessons(state)
    now = round(time.time(), 3)
    specs: list[CandidateSpec] = []
    for i in range(n):
        name, hint = APPROACHES[i % len(APPROACHES)]
        specs.append(
            {
                "id": f"candidate-{uuid.uuid4().hex[:8]}",
                "parent_id": state["trace_id"],
                "planned_at": now,
                "index": i,
                "text": state["task"],
                "question": state.get("question", ""),
                "playbook": lessons,
                "model": setting(ctx.model),
                "temperature": temperatures[i],
                "approach": name,
                "hint": hint,
            }
        )
    return specs


def _check_file(state: SolveState) -> str:
    return state.get("check_file") or DEFAULT_CHECK_FILE


def _lessons(state: SolveState) -> list[Any]:
    """The playbook lessons every candidate is given (the run's one selection)."""
    return (state.get("playbook_selections") or [[]])[0]


def check_spec(state: SolveState, ctx: Context) -> CheckSpec:
    return {
        "command": state.get("check", ""),
        "file": _check_file(state),
        "repo": state.get("repo", ""),
        "timeout_s": setting(ctx.tool_timeout_s),
    }


def check_note(command: str, file: str) -> str:
    """What a candidate's prompt says about its check: the answer is the file's whole content."""
    if not command:
        return ""
    return (
        f"; it is saved as the file {file} and checked by running `{command}`, "
        "so give the file's complete content and nothing else"
    )


def candidate_prompts(state: SolveState) -> dict[tuple[str, int], list[BaseMessage]]:
    """("candidate", index) -> the messages that candidate was sent, rebuilt from the state and its
    branch record (its approach's hint) as nodes/candidate.py built them, so the trace keeps them
    for `parallax export`.
    """
    note, lessons = check_note(state.get("check", ""), _check_file(state)), _lessons(state)
    template = (state.get("prompts") or {}).get("candidate")
    return {
        ("candidate", spec["index"]): candidate_messages(
            state["task"], state.get("question", ""), lessons, spec["hint"], note, version=template
        )
        for b in state.get("branches", [])
        if b["kind"] == "candidate" and (spec := b.get("speculation") or {})
    }


def passed_tests(output: str) -> int:
    """How many tests a check's output says passed: pytest's "N passed", or unittest's "Ran N tests"
    less its failures and errors; 0 when it does not say."""
    ran = RAN.findall(output)
    if ran and not PASSED.search(output):
        return max(0, sum(int(n) for n in ran) - failed_tests(output))
    return sum(int(n) for n in PASSED.findall(output))


def failed_tests(output: str) -> int:
    if RAN.search(output) and not PASSED.search(output):
        return sum(int(n) for n in UNITTEST_BAD.findall(output))
    return sum(int(n) for n in FAILED.findall(output))


# --- picking with a check
# ----------------------------------------------------------------------------


@dataclass
class Pick:
    """The verifier's decision: the winning candidate's id (None: nothing to pick), status and
    why."""

    winner: str | None
    status: str
    confidence: float
    reason: str
    why_lost: dict[str, str] = field(default_factory=dict)
    """Candidate id -> why it did not win (the trace shows it)."""
    matches: list[Match] = field(default_factory=list)


def pick_checked(candidates: Sequence[Mapping[str, Any]]) -> Pick:
    """Among checked candidate records (`speculation.check` set), the first that passed (by the time
    its check finished); with none passing, the one with the most passing tests (then the earliest),
    `needs_review`.
    """
    checked = [
        c for c in candidates if c["status"] == "ok" and (c.get("speculation") or {}).get("check")
    ]
    passed = sorted(
        (c for c in checked if c["speculation"]["check"]["passed"]),
        key=lambda c: c["speculation"]["check"]["finished_at"],
    )
    why: dict[str, str] = {}
    for c in candidates:
        spec = c.get("speculation") or {}
        if c["status"] == "cancelled":
            why[c["id"]] = spec.get("why") or "cancelled"
        elif c["status"] != "ok":
            why[c["id"]] = f"no candidate: {c.get('error') or c['status']}"[:300]
        elif spec.get("refused"):
            why[c["id"]] = f"refused: {spec['refused']}"[:300]
    if passed:
        winner = passed[0]
        for c in passed[1:]:
            why[c["id"]] = f"passed too, but after {winner['id']}"
        for c in checked:
            if not c["speculation"]["check"]["passed"]:
                why.setdefault(
                    c["id"], f"failed its check ({_check_summary(c['speculation']['check'])})"
                )
        return Pick(
            winner["id"],
            "ok",
            CHECK_PASSED_CONFIDENCE,
            f"{winner['id']} ({winner['speculation']['approach']}) passed the check first",
            why,
        )
    if not checked:
        return Pick(
            None,
            "failed",
            0.0,
            "no candidate could be checked: "
            + "; ".join(f"{k}: {v}" for k, v in why.items())[:500],
            why,
        )
    best = max(
        checked,
        key=lambda c: (
            c["speculation"]["check"]["passed_tests"],
            -c["speculation"]["check"]["finished_at"],
        ),
    )
    for c in checked:
        if c is not best:
            why[c["id"]] = (
                f"failed its check ({_check_summary(c['speculation']['check'])}), fewer passing"
                f" tests than {best['id']}"
            )
    tests = best["speculation"]["check"]["passed_tests"]
    return Pick(
        best["id"],
        "needs_review",
        UNCLEAR_CONFIDENCE,
        f"no candidate passed the check; {best['id']} has the most passing tests ({tests})",
        why,
    )


def _check_summary(check: Mapping[str, Any]) -> str:
    if check.get("timed_out"):
        return "timed out"
    return f"exit {check.get('exit')}, {check.get('passed_tests', 0)} passed"


# --- the tournament
# ----------------------------------------------------------------------------------


def pairs(ids: list[str]) -> tuple[list[tuple[str, str]], str | None]:
    """One knockout round: neighbours meet; an odd one out goes on without a match (a bye)."""
    matched = [(ids[i], ids[i + 1]) for i in range(0, len(ids) - 1, 2)]
    return matched, ids[-1] if len(ids) % 2 else None


def match_result(
    first: str, second: str, asked_first_as_a: str | None, asked_second_as_a: str | None
) -> Match:
    """A match from its two verdicts: `asked_first_as_a` is the letter the judge chose with `first`
    shown as A, `asked_second_as_a` the letter with `second` shown as A. Clear only when both name
    the same candidate; an unclear match goes on with `first` (the earlier candidate), marked so the
    pick is `needs_review`.
    """
    picks = []
    if asked_first_as_a is not None:
        picks.append(first if asked_first_as_a == "A" else second)
    if asked_second_as_a is not None:
        picks.append(second if asked_second_as_a == "A" else first)
    clear = len(picks) == 2 and picks[0] == picks[1]
    winner = picks[0] if clear else first
    if clear:
        why = f"both orders chose {winner}"
    elif len(picks) < 2:
        why = "a judge call failed: no clear winner"
    else:
        why = "the judge's pick followed the position, not the answer (the two orders disagree)"
    return {
        "first": first,
        "second": second,
        "winner": winner,
        "loser": second if winner == first else first,
        "clear": clear,
        "why": why,
        "verdicts": [asked_first_as_a, asked_second_as_a],
    }


def tournament_pick(ids: list[str], matches: list[Match]) -> Pick:
    """The pick from a finished tournament's matches: `ok` only when every match the winner played
    was clear."""
    if not matches:
        return Pick(
            ids[0] if ids else None,
            "needs_review" if ids else "failed",
            UNCLEAR_CONFIDENCE if ids else 0.0,
            "a lone candidate: nothing to compare it with" if ids else "no candidate came back",
        )
    winner = matches[-1]["winner"]
    why = {m["loser"]: f"lost to {m['winner']} ({m['why']})" for m in matches}
    played = [m for m in matches if winner in (m["first"], m["second"])]
    unclear = [m for m in played if not m["clear"]]
    if unclear:
        return Pick(
            winner,
            "needs_review",
            UNCLEAR_CONFIDENCE,
            f"no clear margin: {len(unclear)} of the {len(played)} match(es) {winner} played went"
            " one way in one order and the other way swapped",
            why,
            matches,
        )
    return Pick(
        winner,
        "ok",
        JUDGED_CONFIDENCE,
        f"{winner} won all {len(played)} of its match(es) in both orders",
        why,
        matches,
    )
