"""A vote's answer reduced to its final value (logic/vote.py `final_value`), on replies of the
embedded model.

tests/data/smollm2_vote_replies.jsonl holds every vote branch of 33 vote runs (the README's three
questions and the first 30 GSM8K test questions, 5 votes each) made with SmolLM2-135M-Instruct
through the product path before the vote schema was bounded: 165 replies, 121 valid, 40 cut at the
384-token cap. The answers below are copied from it as the model wrote them.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from parallax.logic.vote import final_value, normalize_answer

REPLIES = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "data" / "smollm2_vote_replies.jsonl").open()
]
VALID = [r for r in REPLIES if r["status"] == "ok"]


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ("144", "144"),
        ("no, 221 is not a prime number.", "no"),
        ("No, 221 is not a prime number.", "no"),
        ("Yes, 221 is a prime number.", "yes"),
        ("$15.00", "15"),
        ("120 meters", "120"),
        ("150 miles", "150"),
        ("200 words", "200"),
        ("16 glasses = 1.60 * 2 = 3.20 dollars", "3.2"),
        (".12 * $10 = $12 * 10 = $120", "120"),
        ("She started with 5 vacuum cleaners.", "5"),
        ("4,", "4"),
        (".2", "0.2"),
        ("90.25", "90.25"),
        (
            "The load is too large to fit in the current window.",
            "the load is too large to fit in the current window",
        ),
    ],
)
def test_real_replies_reduce_to_the_value_they_end_with(answer, value):
    assert any(r["answer"] == answer for r in VALID), "copied from the collected replies"
    assert final_value(answer) == value


def test_every_collected_reply_reduces_idempotently_and_never_to_more_answers_than_its_text():
    for reply in VALID:
        value = final_value(reply["answer"])
        assert final_value(value) == value, reply["answer"]
    by_question: dict[str, list[str]] = {}
    for reply in VALID:
        by_question.setdefault(reply["question"], []).append(reply["answer"])
    merged = [
        len(Counter(map(normalize_answer, a))) - len(Counter(map(final_value, a)))
        for a in by_question.values()
    ]
    assert (
        min(merged) >= 0 and sum(merged) >= 1
    )  # never more answers; some the plain normaliser counted apart


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ("12 * 12 = 144", "144"),
        ("The answer is 144.", "144"),
        ("144.0", "144"),
        ("(B)", "B"),
        ("B) 42", "B"),
        ("Option b", "B"),
        ("A farmer has twenty-two sheep", "22"),
        ("221 is not prime", "221 is not prime"),
        ("n", "no"),
        ("{17: 22}", "22"),
    ],
)
def test_the_rules_the_reduction_states(answer, value):
    assert final_value(answer) == value
