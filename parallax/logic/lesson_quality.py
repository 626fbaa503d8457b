"""Lessons worth keeping: grounded instructions, not verdicts, bare numbers or stories.

See docs/internals/learning.md#lessons-worth-keeping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from parallax.runtime import linear_regex
from parallax.runtime.lesson_screening import quarantine_entry
from parallax.state.context import Embedder

MIN_SHARED_TERMS = 2
SIMILARITY_FLOOR = 0.45
"""MiniLM cosine similarity (lesson vs task and run) above which a lesson with fewer shared terms
still counts as grounded. Calibrated with bench/lesson_quality.py on the 55 grounded lessons of
the labelled set: against their own task the median similarity is 0.58; against a task of another
formula the 95th percentile is 0.37 (3.6% of those pairs reach 0.45), and no instruction-shaped
junk lesson reaches 0.36. Key terms decide first; with this fallback 98% of grounded lessons are
kept and all junk is rejected."""

BARE_NUMBER = "a bare number, not an instruction"
VERDICT = "a verdict on the run, not an instruction"
NARRATIVE = "a narrative, not an instruction"
UNGROUNDED = "not grounded: names nothing its task or run contains"

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = frozenset(
    """
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has
have having he her here hers him his how i if in into is it its itself just me more most my no nor
not now of off on once only or other our ours out over own same she should so some such than that
the their theirs them then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yet one two three first
second given using use used make sure always never must need needs note per each every instead
answer answers question questions task tasks value values number numbers result results step steps
solution solver model correct correctly incorrect wrong right check calculate compute computing
calculated computed formula formulas find get give gives take round rounded decimal decimals places
place final
""".split()
)
_IMPERATIVE = frozenset(
    """
add apply avoid calculate check classify compare compute confirm convert count deduct define
determine distinguish divide do don't double-check ensure exclude express extract identify include
keep label look map match multiply never always note prefer read recall record remember report round
scale select separate start subtract sum tag take treat use verify watch write annualize annualise
average discount net normalize normalise interpret assign choose
""".split()
)
# A lesson is model text: the patterns that read it whole run on RE2 (linear time);
# `\bover\b.*\bratio\b` or `\d[\d,.\s]*...[\s.)]*$` on `re` took seconds on a long enough lesson.
# _WORD and _CAMEL read one word each.
_ADVICE = linear_regex.compile(
    r"\b(should|must|needs? to|have to|has to|always|never|make sure|be sure|remember|"
    r"do not|don't|avoid|prefer|rather than|instead of)\b",
    ignore_case=True,
)
_RULE = linear_regex.compile(
    r"(=|\bequals?\b|\bis (?:calculated|computed|defined|measured|found|obtained|given)"
    r" (?:as|by)\b|"
    r"\bdivided by\b|\bmultiplied by\b|\bover\b.*\bratio\b|\bmeans\b|\bcorresponds? to\b|"
    r"\bis tagged\b|\bmaps? to\b|\bgoes? (?:to|under)\b)",
    ignore_case=True,
)
_CONDITION = linear_regex.compile(
    r"^(when|if|for|whenever|before|after|in a|in an|with)\b[^,]{3,},\s*\S", ignore_case=True
)
_VERDICT = linear_regex.compile(
    r"^(?:(?:the|this|that|my|your|its)\s+)?(?:final\s+)?"
    r"(?:(?:solution|answer|response|result|output|reply|calculation|prediction|run|attempt|model|solver|it)"
    r"(?:\s+(?:given|provided|here|above|returned|computed|calculated|produced|chosen))?\s+)?"
    r"(?:is|was|were|are|looks|seems)?\s*(?:not\s+)?(?:entirely\s+|completely\s+|totally\s+|clearly\s+)?"
    r"(?:correct|incorrect|wrong|right|accurate|inaccurate|ok|okay|fine|good|bad|perfect|true|false|"
    r"well done|good job|great|excellent|nice|a mistake|an error|mistaken)\b[\s.!]*$",
    ignore_case=True,
)
_NUMBERISH = linear_regex.compile(
    r"^[\s$€£¥+\-−~≈()]*\d[\d,.\s]*(?:%|percent|x|times|bn|m|k|million|billion|thousand)?[\s.)]*$",
    ignore_case=True,
)


@dataclass(frozen=True)
class LessonCheck:
    ok: bool
    reason: str = ""
    shared_terms: list[str] = field(default_factory=list)
    similarity: float | None = None


def key_terms(text: str) -> set[str]:
    """Content words of `text`, XBRL-style tags split, each cut to its first six letters."""
    terms = set()
    for word in _WORD.findall(text):
        for part in _CAMEL.findall(word) if any(c.isupper() for c in word[1:]) else [word]:
            low = part.lower()
            if len(low) >= 3 and low not in _STOP and not low.isdigit():
                terms.add(low[:6])
    return terms


def is_instruction(lesson: str) -> bool:
    text = lesson.strip().lstrip("-*•0123456789.) ").strip()
    first = text.split(" ", 1)[0].lower().strip(",.:;") if text else ""
    return bool(
        first in _IMPERATIVE
        or _ADVICE.search(text)
        or _RULE.search(text)
        or _CONDITION.search(text)
    )


def form_problem(lesson: str) -> str:
    """Why `lesson` is not an instruction at all ("" when it is one); no task needed."""
    text = " ".join(lesson.split()).strip("\"'“” ")
    if (
        not text
        or _NUMBERISH.match(text)
        or len(key_terms(text)) == 0
        and any(ch.isdigit() for ch in text)
    ):
        return BARE_NUMBER
    if _VERDICT.match(text):
        return VERDICT
    if not is_instruction(text):
        return NARRATIVE
    return ""


def check_lesson(
    lesson: str, grounds: str, embed: Embedder | None = None, floor: float = SIMILARITY_FLOOR
) -> LessonCheck:
    """Whether `lesson` is worth keeping, given `grounds` (its task and run as text)."""
    problem = form_problem(lesson)
    if problem:
        return LessonCheck(False, problem)
    shared = sorted(key_terms(lesson) & key_terms(grounds))
    if len(shared) >= MIN_SHARED_TERMS:
        return LessonCheck(True, "", shared)
    similarity = None
    if embed is not None:
        vectors = np.asarray(embed([lesson, grounds]))
        similarity = round(float(vectors[0] @ vectors[1]), 4)
        if similarity >= floor:
            return LessonCheck(True, "", shared, similarity)
    detail = f"shares {len(shared)} key term(s)" + (f" ({', '.join(shared)})" if shared else "")
    if similarity is not None:
        detail += f", similarity {similarity} < {floor}"
    return LessonCheck(False, f"{UNGROUNDED} ({detail})", shared, similarity)


def keep_grounded(
    lessons: list[str], grounds: str, embed: Embedder | None, provenance: list[str]
) -> tuple[list[str], list[dict[str, Any]]]:
    """(lessons worth keeping, entries for the rest, kept like quarantined lessons with their
    reasons)."""
    kept, rejected = [], []
    for lesson in lessons:
        verdict = check_lesson(lesson, grounds, embed)
        if verdict.ok:
            kept.append(lesson)
        else:
            rejected.append(
                {
                    **quarantine_entry(lesson, [verdict.reason], "lesson check", provenance),
                    "check": "grounding",
                }
            )
    return kept, rejected
