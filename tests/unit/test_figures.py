"""The figure rule of logic/quotes.py: a number counts as printed in a quote only as a token of its
own.

Properties over generated numbers and surroundings (hypothesis): a figure set off by spaces or by
the punctuation money and tables use ($, (, ), %, ., ,, :, ;) is shown; the same figure glued to a
letter on either side, directly or through a hyphen ("3M", "Q3", "H2O", "10-K"), is not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parallax.logic.quotes import number_shown

LETTERS = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
BEFORE = st.sampled_from(["", " ", "$", "(", "was ", "€", "£", ": ", "-", "~"])
AFTER = st.sampled_from(["", " ", ")", "%", ".", ",", ";", " million", " units"])


def written(n: int, commas: bool) -> str:
    return f"{n:,}" if commas else str(n)


@given(n=st.integers(0, 10**9), commas=st.booleans(), before=BEFORE, after=AFTER)
def test_a_figure_set_off_from_words_is_shown(n, commas, before, after):
    assert number_shown(n, f"{before}{written(n, commas)}{after}")


@given(whole=st.integers(0, 99_999), tenths=st.integers(0, 9), before=BEFORE, after=AFTER)
def test_a_decimal_figure_is_shown_to_its_printed_digits(whole, tenths, before, after):
    assert number_shown(float(f"{whole}.{tenths}"), f"{before}{whole}.{tenths}{after}")


@given(
    n=st.integers(0, 10**6),
    commas=st.booleans(),
    letter=LETTERS,
    hyphen=st.booleans(),
    left=st.booleans(),
)
def test_a_figure_glued_to_a_letter_is_not_shown(n, commas, letter, hyphen, left):
    """Nothing else in the quote is a number, so no other figure can stand in for it."""
    glue = f"{letter}-" if hyphen else letter
    quote = (
        f"{glue}{written(n, commas)}"
        if left
        else f"{written(n, commas)}{'-' + letter if hyphen else letter}"
    )
    assert not number_shown(n, f"the {quote} item")


@pytest.mark.parametrize(
    ("quote", "value", "shown"),
    [
        ("3M Company and Subsidiaries", 3, False),  # issue 30: verified capex = 3 over a 10-K
        ("Q3 revenue", 3, False),
        ("H2O", 2, False),
        ("Form 10-K", 10, False),
        ("COVID-19 costs", 19, False),
        ("3rd quarter", 3, False),
        ("3m units", 3, False),
        ("3m units", 3_000_000, False),  # a glued scale letter: no
        ("12M", 1, False),
        ("1.5M", 5, False),
        ("FY2023", 2023, False),
        ("$3", 3, True),
        ("3.5%", 3.5, True),
        ("3.5%", 0.035, True),
        ("(3)", 3, True),
        ("3,000", 3000, True),
        ("3 million units", 3_000_000, True),
        ("were $1,749 million.", 1749, True),
        ("fiscal 2023: 1,234", 1234, True),
    ],
)
def test_the_documented_cases(quote, value, shown):
    assert number_shown(value, quote) is shown
