"""Patterns that read model or user text, timed on hostile text of 20,000 characters (goal: 50 ms
each).

Three parts, one JSON object:

- `normaliser`: logic/vote.py's `final_value` on answers that made its patterns backtrack (a run of
  digits that ends in something else), on RE2 as it runs now, against the same function with the
  same patterns compiled by Python's `re` (the old code path, swapped in for the run). The old path
  is measured at 2,000 and 5,000 characters only (quadratic: tens of seconds at 20,000);
  `old_20000_estimate_ms` scales the 5,000 figure by 16.
- `user_pattern`: an output schema's `"pattern": "^(a+)+$"` validating a reply that almost matches,
  through logic/user_schema.py's validator (RE2) at 20,000 characters, against jsonschema's own
  validator (Python's `re`) at 18 to 24 characters (exponential: x4 every 2 more).
- `sweep`: every function that puts model or user text through patterns (votes, scoring, check
  output, lessons, quotes, redaction, screening, routing, slicing, JSON in replies), each on the
  most expensive of a family of hostile inputs at 5,000 characters, then timed on that input at
  20,000: `ratio` near 4 is linear.

Run: python -m bench.regex_bounds
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import time
from collections.abc import Callable
from typing import Any

from jsonschema import Draft202012Validator

from parallax.logic import (
    lesson_quality,
    playbook_selection,
    quotes,
    routing,
    scoring,
    slicing,
    speculation,
    vote,
)
from parallax.logic.user_schema import validation_errors
from parallax.runtime import redaction, screening, structured_call

SIZE = 20_000
GOAL_MS = 50.0
VOTE_PATTERNS = (
    "NUMBER_WITH_UNIT",
    "LEADING_POINT",
    "CANONICAL_NUMBER",
    "OPTION",
    "LEADING_WORD",
    "ENDS_WITH_NUMBER",
)


def _ms(run: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return round(best * 1000, 2)


def _final_value(answer: str) -> Callable[[], object]:
    def run() -> object:
        vote.final_value.cache_clear()
        return vote.final_value(answer)

    return run


def _on_python_re(run: Callable[[], object]) -> Callable[[], object]:
    """`run` with vote.py's patterns compiled by Python's `re` for its duration (the old engine,
    same patterns)."""

    def swapped() -> object:
        kept = {name: getattr(vote, name) for name in VOTE_PATTERNS}
        try:
            for name, pattern in kept.items():
                setattr(vote, name, re.compile(pattern.pattern))
            return run()
        finally:
            for name, pattern in kept.items():
                setattr(vote, name, pattern)

    return swapped


def normaliser() -> dict[str, Any]:
    cases: dict[str, Callable[[int], str]] = {
        "digits then '#'": lambda n: "1" * n + "#",
        "digits then 'e1'": lambda n: "1" * n + "e1",
        "thousands then '#'": lambda n: "1," * (n // 2) + "#",
    }
    out: dict[str, Any] = {}
    for name, make in cases.items():
        old = {
            size: _ms(_on_python_re(_final_value(make(size))), repeat=1) for size in (2_000, 5_000)
        }
        new = {size: _ms(_final_value(make(size))) for size in (5_000, SIZE)}
        out[name] = {
            "old_2000_ms": old[2_000],
            "old_5000_ms": old[5_000],
            "old_20000_estimate_ms": round(old[5_000] * 16),
            "new_5000_ms": new[5_000],
            "new_20000_ms": new[SIZE],
            "new_within_goal": new[SIZE] <= GOAL_MS,
            "same_answer_at_5000": (
                _on_python_re(_final_value(make(5_000)))() == _final_value(make(5_000))()
            ),
        }
    return out


def user_pattern() -> dict[str, Any]:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}
    old = Draft202012Validator(schema)
    old_ms = {
        n: _ms(lambda n=n: list(old.iter_errors({"code": "a" * n + "!"})), repeat=1)
        for n in (18, 20, 22, 24)
    }
    new_ms = _ms(lambda: validation_errors(schema, {"code": "a" * SIZE + "!"}))
    return {
        "pattern": "^(a+)+$",
        "input": "'a' * n + '!'",
        **{f"old_{n}_chars_ms": v for n, v in old_ms.items()},
        "new_20000_chars_ms": new_ms,
        "new_within_goal": new_ms <= GOAL_MS,
        "new_rejects_it": validation_errors(schema, {"code": "a" * SIZE + "!"}) != [],
        "new_accepts_a_match": validation_errors(schema, {"code": "a" * SIZE}) == [],
    }


def _quiet(function: Callable[[str], object]) -> Callable[[str], object]:
    def run(text: str) -> object:
        try:
            return function(text)
        except Exception as exc:  # noqa: BLE001 (a parse failure is an answer too; only time counts here)
            return exc

    return run


SWEEP: dict[str, Callable[[str], object]] = {
    "vote.final_value": lambda s: _final_value(s)(),
    "scoring.numeric": lambda s: scoring.numeric(s, "12", s),
    "speculation.passed_tests": speculation.passed_tests,
    "lesson_quality.form_problem": lesson_quality.form_problem,
    "lesson_quality.key_terms": lesson_quality.key_terms,
    "quotes.quote_occurs": lambda s: quotes.quote_occurs(s[: len(s) // 2], s),
    "quotes.number_shown": lambda s: quotes.number_shown(12.5, s),
    "redaction.redact": redaction.redact,
    "screening.screen": screening.screen,
    "screening.screen_input": screening.screen_input,
    "routing.choose_route": lambda s: routing.choose_route(s, s, 10**9),
    "slicing.split_into_slices": lambda s: slicing.split_into_slices(s, 4_000),
    "playbook_selection.retrieval_text": lambda s: playbook_selection.retrieval_text(s, 10**9),
    "structured_call.extract_json": structured_call.extract_json,
}
PREFIXES = ("", "1", "a", "over ", "the answer is ", "Ran 1 tests", "sk-", "Bearer ", "key: ", "# ")
UNITS = (
    "1",
    "1 ",
    "1,",
    "a",
    "a ",
    ". ",
    "\t",
    "{",
    '{"a":',
    "-",
    "a@",
    "+1",
    "1-",
    "\n",
    "over ",
    "Aa",
    "\u2026",
)
TAILS = ("!", "#", "\x00")


def sweep() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, function in SWEEP.items():
        run = _quiet(function)
        timed = []
        for prefix, unit, tail in itertools.product(PREFIXES, UNITS, TAILS):
            text = prefix + unit * (5_000 // len(unit)) + tail
            start = time.perf_counter()
            run(text)
            timed.append((time.perf_counter() - start, prefix, unit, tail))
        _, prefix, unit, tail = max(timed)
        small_text, large_text = (prefix + unit * (n // len(unit)) + tail for n in (5_000, SIZE))
        small = _ms(functools.partial(run, small_text))
        large = _ms(functools.partial(run, large_text))
        out[name] = {
            "worst_input": f"{prefix!r} + {unit!r} * n + {tail!r}",
            "ms_5000": small,
            "ms_20000": large,
            "ratio": round(large / small, 1) if small else None,
            "within_goal": large <= GOAL_MS,
        }
    return out


def main() -> None:
    figures = {
        "size": SIZE,
        "goal_ms": GOAL_MS,
        "normaliser": normaliser(),
        "user_pattern": user_pattern(),
        "sweep": sweep(),
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
