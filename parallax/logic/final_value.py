"""A vote's answer reduced to its final value, so one meaning is one answer.

Small models answer "144", "12 * 12 = 144" and "The answer is 144." to the same question;
counted as written, a vote of five agreeing models looks like three disagreeing ones and
goes to a judge or to review for nothing. Before counting, an answer is reduced to:

- yes or no, when it starts with one ("No, 221 = 13 x 17" is "no");
- the option of a multiple choice, when it is one ("(B)", "B) 42", "Option b" are "B");
- the number it ends with, when it ends with one, perhaps followed by a unit or two words
  ("12 * 12 = 144", "22 sheep", "He has 22 sheep now." are 144, 22, 22);
- else its normalised text (logic/vote.py `normalize_answer`: case, spacing, number words).

The rules read the answer alone, never the question, and are idempotent.
"""

from __future__ import annotations

import re

from parallax.logic.vote import NO, YES, normalize_answer

OPTION = re.compile(r"^\s*(?:(?:the\s+)?answer\s*(?:is)?\s*:?\s*)?(?:option|choice)?\s*\(?([A-Ea-e])(?:\)|[.:](?=\s|$)|$)", re.I)
LEADING_WORD = re.compile(r"^\s*([A-Za-z]+)\b[\s,.;:!-]")
NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?"
ENDS_WITH_NUMBER = re.compile(rf"(?P<num>{NUMBER})\s*(?P<tail>(?:[A-Za-z$€£%.'\-/]+\s*){{0,2}})[\s.!?)\]\"'*]*$")
NOT_A_UNIT = {"is", "are", "was", "were", "be", "not", "no", "and", "or", "but", "because", "than", "if", "so"}
"""Words after a number that make the answer a statement about it, not a quantity ("221 is not prime")."""


def final_value(answer: str) -> str:
    """The canonical final value of a vote's answer (see the module docstring)."""
    text = normalize_answer(answer)
    if _is_number(text) or text in ("yes", "no"):
        return text
    raw = " ".join(str(answer).split())
    first = LEADING_WORD.match(raw)
    if first and first.group(1).lower() in YES | NO and first.group(1).lower() not in ("n", "y"):
        return "yes" if first.group(1).lower() in YES else "no"
    option = OPTION.match(raw)
    if option:
        return option.group(1).upper()
    worded = normalize_answer(_digits(raw))
    match = ENDS_WITH_NUMBER.search(worded) or ENDS_WITH_NUMBER.search(raw)
    if match and not NOT_A_UNIT & set(match.group("tail").lower().split()):
        number = normalize_answer(match.group("num"))
        if _is_number(number):
            return number
    return text


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+(?:\.\d+)?%?", text))


def _digits(text: str) -> str:
    """Number words as digits ("twenty-two sheep" -> "22 sheep"); unchanged when there are none."""
    from text_to_num import alpha2digit

    return alpha2digit(text, "en", threshold=0) if any(c.isalpha() for c in text) else text
