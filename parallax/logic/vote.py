"""Vote answers reduced to one form per meaning, and decided by threshold and quorum.

See docs/internals/votes.md#answers-in-one-form-per-meaning.
"""

from __future__ import annotations

import functools
from collections import Counter
from decimal import Context, Decimal, InvalidOperation

from text_to_num import alpha2digit

from parallax.runtime import linear_regex

YES = {"yes", "y", "true", "correct", "right", "yeah", "yep"}
NO = {"no", "n", "false", "incorrect", "wrong", "nope"}
NUMBER_WITH_UNIT = linear_regex.compile(
    r"^(?:the answer"
    r" is\s+)?(?:[$€£¥]\s*)?(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+)"
    r"\s*(?P<pct>%|percent\b)?\s*(?P<unit>[a-z$€£¥][a-z.$€£¥ ]{0,20})?$"
)
LEADING_POINT = linear_regex.compile(r"^([-+]?)\.(\d)")
CANONICAL_NUMBER = linear_regex.compile(r"-?\d+(?:\.\d+)?%?")
NOT_A_UNIT = {
    "is",
    "are",
    "was",
    "were",
    "be",
    "not",
    "no",
    "and",
    "or",
    "but",
    "because",
    "than",
    "if",
    "so",
}
"""Words after a number that make an answer a statement about it, not a quantity ("221 is not
prime")."""
OPTION = linear_regex.compile(
    r"^\s*(?:(?:the\s+)?answer\s*(?:is)?\s*:?\s*)?(?:option|choice)?\s*\(?([A-Ea-e])"
    r"(?:\)|[.:](?:\s|$)|$)",
    ignore_case=True,
)
LEADING_WORD = linear_regex.compile(r"^\s*([A-Za-z]+)\b[\s,.;:!-]")
ENDS_WITH_NUMBER = linear_regex.compile(
    r"(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?)\s*"
    r"(?P<tail>(?:[A-Za-z$€£%.'\-/]+\s*){0,2})[\s.!?)\]\"'*]*$"
)


def _canonical_number(raw: str) -> str | None:
    try:
        value = Decimal(raw.replace(",", ""))
    except InvalidOperation:
        return None
    if value == 0:
        return "0"
    text = format(value.normalize(Context(prec=max(28, len(raw)))), "f")  # every digit kept, not 28
    return text.rstrip("0").rstrip(".") if "." in text else text


def normalize_answer(answer: str) -> str:
    """Canonical form of an answer for vote counting (idempotent)."""
    text = " ".join(str(answer).strip().lower().split())
    text = LEADING_POINT.sub(r"\g<1>0.\2", text)  # ".2" is 0.2, not 2 once the dot is stripped
    text = text.strip(" \t\"'`*.,;:!?()[]{}")
    if text in YES:
        return "yes"
    if text in NO:
        return "no"
    for candidate in (text, _digits_for_words(text)):
        match = NUMBER_WITH_UNIT.match(candidate) if candidate else None
        if match and not NOT_A_UNIT & set((match.group("unit") or "").split()):
            number = _canonical_number(match.group("num"))
            if number is not None:
                return number + ("%" if match.group("pct") else "")
    return text


def _digits_for_words(text: str) -> str | None:
    """`text` with English number words as digits ("fifteen apples" -> "15 apples"); None if it has
    none."""
    if not any(c.isalpha() for c in text):
        return None
    converted = alpha2digit(text, "en", threshold=0).strip(" .,;:!?")
    return converted if converted != text else None


@functools.lru_cache(maxsize=1024)
def final_value(answer: str) -> str:
    """The canonical final value of a vote's answer (docs/internals/votes.md); idempotent.

    Cached for the last 1,024 answers: a run's votes mostly give the same few, and the rules read
    nothing but the answer."""
    text = normalize_answer(answer)
    if _is_number(text) or text in ("yes", "no"):
        return text
    raw = " ".join(str(answer).split())
    first = LEADING_WORD.match(raw)
    if first and first.group(1).lower() in (YES | NO) - {"y", "n"}:
        return "yes" if first.group(1).lower() in YES else "no"
    option = OPTION.match(raw)
    if option:
        return option.group(1).upper()
    worded = normalize_answer(_digits_for_words(raw.lower()) or raw)
    match = ENDS_WITH_NUMBER.search(worded) or ENDS_WITH_NUMBER.search(raw)
    if match and not NOT_A_UNIT & set(match.group("tail").lower().split()):
        number = normalize_answer(match.group("num"))
        if _is_number(number):
            return number
    return text


def _is_number(text: str) -> bool:
    return bool(CANONICAL_NUMBER.fullmatch(text))


def tally(answers: list[str], min_votes: int) -> tuple[str | None, dict[str, int]]:
    """Counts per final value, and the winner if it alone reaches `min_votes`."""
    return tally_values([final_value(a) for a in answers], min_votes)


def tally_values(values: list[str], min_votes: int) -> tuple[str | None, dict[str, int]]:
    """`tally` of answers whose final values are already known (a vote record's `vote`), in the same
    order."""
    counts = Counter(values)
    ranked = counts.most_common()
    if not ranked:
        return None, {}
    top, top_count = ranked[0]
    tied = len(ranked) > 1 and ranked[1][1] == top_count
    winner = top if top_count >= min_votes and not tied else None
    return winner, dict(ranked)


def strict_majority(n: int) -> int:
    return n // 2 + 1


def quorum(asked: int, min_votes: int | None = None) -> int:
    """Valid votes a vote needs before any answer counts: `min_votes`, else a strict majority of
    those asked."""
    return min_votes or strict_majority(asked)


def quorum_shortfall(valid: int, asked: int, min_votes: int | None = None) -> str:
    """Why a vote cannot settle for lack of valid votes ('' when the quorum is met)."""
    needed = quorum(asked, min_votes)
    if valid >= needed:
        return ""
    return f"only {valid} of {asked} votes were valid, below the quorum of {needed}"
