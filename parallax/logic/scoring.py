"""Score a run against its target: numeric, exact or contains; or by execution feedback.

Numeric scoring rounds as the question asks ("... with 2 decimal places") and otherwise
allows a small relative tolerance, so "2.0", "2.00" and "$2" all match a target of 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, TypedDict

from parallax.logic.vote import normalize_answer
from parallax.runtime import linear_regex

# answers and questions are model and user text: RE2 (linear time), not `re`, reads them
DECIMALS = linear_regex.compile(r"(\d+)\s+decimal places?", ignore_case=True)
NUMBER = linear_regex.compile(r"[-+]?\$?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")


def first_number(text: str) -> Decimal | None:
    normalised = normalize_answer(text).rstrip("%")
    for candidate in [normalised, *NUMBER.findall(text)]:
        try:
            return Decimal(candidate.replace(",", "").replace("$", ""))
        except InvalidOperation:
            continue
    return None


def numeric(answer: str, target: str, question: str = "", rel_tol: float = 1e-3) -> bool | None:
    """True/False when the target is a number; None when this scorer does not apply."""
    expected = first_number(target)
    if expected is None or normalize_answer(target).rstrip("%") != normalize_answer(str(expected)):
        return None
    got = first_number(answer)
    if got is None:
        return False
    places = DECIMALS.search(question)
    if places:
        quantum = Decimal(1).scaleb(-int(places.group(1)))
        if got.quantize(quantum) == expected.quantize(quantum):
            return True
    return abs(got - expected) <= Decimal(str(rel_tol)) * max(abs(expected), Decimal(1))


def exact(answer: str, target: str) -> bool:
    return normalize_answer(answer) == normalize_answer(target)


def contains(answer: str, target: str) -> bool:
    return normalize_answer(target) in normalize_answer(answer)


SCORERS = {"exact": exact, "contains": contains}


class Verdict(TypedDict):
    correct: bool
    scorer: str
    """What decided: numeric, exact, contains, or execution (no target: the run's status)."""
    feedback: str


def score(
    run: Mapping[str, Any], target: str | None, question: str, scorer: str = "auto"
) -> Verdict:
    """{"correct": bool, "scorer": name, "feedback": str} for one solve run."""
    answer = run.get("answer", "")
    if target is None:
        ok = run.get("status") == "ok"
        return {
            "correct": ok,
            "scorer": "execution",
            "feedback": f"status {run.get('status')}: {run.get('reason', '')}",
        }
    if scorer == "auto":
        result = numeric(answer, target, question)
        if result is not None:
            return {
                "correct": result,
                "scorer": "numeric",
                "feedback": f"expected {target}, got {answer!r}",
            }
        scorer = "exact"
    correct = (
        numeric(answer, target, question)
        if scorer == "numeric"
        else SCORERS[scorer](answer, target)
    )
    # `numeric` is None when the target is no number: that is a miss, not a pass
    return {
        "correct": bool(correct),
        "scorer": scorer,
        "feedback": f"expected {target}, got {answer!r}",
    }
