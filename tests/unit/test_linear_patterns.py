"""Patterns that read model or user text: what they answer on long, hostile text, and which user
patterns are refused.

How long they take is bench/regex_bounds.py's business; here, that long hostile inputs still get the
right answers (they are read by RE2 now), and that a schema's pattern RE2 cannot run is refused
before any model call, in one line.
"""

from __future__ import annotations

import pytest

from parallax.logic.lesson_quality import BARE_NUMBER, form_problem, is_instruction
from parallax.logic.quotes import quote_occurs
from parallax.logic.scoring import numeric
from parallax.logic.speculation import failed_tests, passed_tests
from parallax.logic.user_schema import (
    SchemaProblem,
    check_patterns,
    checked_schema,
    reply_model,
    validation_errors,
)
from parallax.logic.vote import final_value, normalize_answer
from parallax.runtime import linear_regex
from parallax.runtime.failure_cause import ParseFailure
from parallax.runtime.structured_call import parse_reply

LONG = 20_000


def _field(pattern: str) -> dict[str, object]:
    return {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": pattern}},
        "required": ["code"],
    }


def test_long_answers_still_normalise_to_their_values():
    digits = "7" * LONG
    assert (
        normalize_answer(f"The answer is {digits} apples.") == digits
    )  # every digit kept, not 28 of them
    assert normalize_answer("1" * 30 + "1") != normalize_answer("1" * 30 + "2")
    assert final_value(f"{digits} * 1 = {digits}") == digits
    assert final_value("1" * LONG + "#") == normalize_answer(
        "1" * LONG + "#"
    )  # no number at the end: its text
    assert final_value("9" * LONG + "e1") == "1"  # the number it ends with
    assert final_value("(B) " + "x" * LONG) == "B"
    assert final_value("fifteen " * (LONG // 8)).endswith("15")


def test_check_output_and_lessons_of_any_length_are_read_right():
    assert passed_tests("1" * LONG + "\n3 passed, 1 failed in 0.1s") == 3
    assert failed_tests("1" * LONG + "\n3 passed, 1 failed in 0.1s") == 1
    assert passed_tests("Ran 4 tests in 0.001s\n\nFAILED (failures=1)\n" + "9" * LONG) == 3
    assert form_problem("1" + " " * LONG + "x") == BARE_NUMBER
    assert is_instruction("margin over " * (LONG // 12) + "revenue is the ratio")
    assert not is_instruction("over " * (LONG // 5) + "and on")
    assert numeric("12.345", "12.35", "to 2 decimal places " + "1" * LONG) is True


def test_an_ellipsis_in_a_quote_still_splits_it_after_a_long_run_of_spaces():
    assert quote_occurs(
        "revenue rose" + " " * LONG + "... to 12 million",
        "Revenue rose sharply to 12 million dollars",
    )
    assert not quote_occurs(
        "revenue fell" + "\t" * LONG + "… to 12 million", "Revenue rose sharply to 12 million"
    )


def test_an_exponential_pattern_is_matched_by_re2_on_a_long_reply():
    # ^(a+)+$ on Python's re: 0.55 s at 24 characters, x4 every 2 more; on RE2 it is linear, so this
    # returns at once
    schema = _field("^(a+)+$")
    checked_schema(schema)
    assert validation_errors(schema, {"code": "a" * LONG}) == []
    errors = validation_errors(schema, {"code": "a" * LONG + "!"})
    assert (
        len(errors) == 1
        and errors[0].startswith("code: ")
        and "does not match '^(a+)+$'" in errors[0]
    )
    model = reply_model(schema, "Coded")
    assert model.model_validate({"code": "aaaa"}).model_dump() == {"code": "aaaa"}
    with pytest.raises(ParseFailure, match="does not match"):
        parse_reply('{"code": "' + "a" * LONG + 'b"}', model)


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (
            r"^(a)\1$",
            r"pattern '^(a)\\1$' uses a backreference (\1), which this server does not run",
        ),
        (r"(?<n>a)\k<n>", r"uses a backreference (\k<name>)"),
        (r"^(?=.*\d)\w+$", "uses a lookahead (?=...)"),
        (r"^(?!x)", "uses a negative lookahead (?!...)"),
        (r"(?<=\$)\d+", "uses a lookbehind (?<=...)"),
        (r"(?<!-)\d+", "uses a negative lookbehind (?<!...)"),
        (r"a++b", "uses a possessive quantifier"),
        (r"(?>a|ab)c", "uses an atomic group"),
        (r"a{1001}", "repeats a part more than 1,000 times"),
        (r"((a{100}){100}){100}", "repeats a part more than 1,000 times"),
        ("a" * 1_001, "is 1,001 characters long, over the 1,000 this server runs"),
    ],
)
def test_patterns_re2_cannot_run_are_refused_with_the_reason(pattern, says):
    for schema in (
        _field(pattern),
        {
            "type": "object",
            "properties": {
                "x": {
                    "anyOf": [
                        {"type": "array", "items": {"type": "string", "pattern": pattern}},
                        {"type": "null"},
                    ]
                }
            },
        },
    ):
        with pytest.raises(SchemaProblem) as caught:
            checked_schema(schema)
        message = str(caught.value)
        assert says in message and "\n" not in message and "rewrite the pattern" in message


def test_the_refusal_names_where_the_pattern_is():
    schema = {
        "type": "object",
        "$defs": {"Id": {"type": "string", "pattern": r"(x)\1"}},
        "properties": {"id": {"$ref": "#/$defs/Id"}},
    }
    with pytest.raises(SchemaProblem, match=r"^output_schema/\$defs/Id: pattern"):
        check_patterns(schema)


def test_pattern_properties_are_refused_and_data_named_pattern_is_not_read_as_one():
    with pytest.raises(
        SchemaProblem, match="uses patternProperties, which this server does not run"
    ):
        checked_schema(
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "patternProperties": {"^(a+)+$": {"type": "string"}},
            }
        )
    # a field called "pattern", and enum/const/default data that look like schemas, are not patterns
    checked_schema(
        {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "enum": [r"(a)\1"], "default": r"(?=x)"},
                "shape": {
                    "type": "object",
                    "properties": {"k": {"type": "string"}},
                    "const": {"pattern": r"(a)\1"},
                },
            },
        }
    )


def test_ecmascript_patterns_re2_can_run_are_accepted_and_matched():
    schema = _field(
        r"^(?<year>\d{4})-\u0041\p{Lu}$"
    )  # a named group and \u escape: ECMAScript, not Python's re
    checked_schema(schema)
    assert validation_errors(schema, {"code": "2024-AB"}) == []
    assert validation_errors(schema, {"code": "2024-Ab"}) != []
    assert (
        linear_regex.from_ecmascript(r"\\u0041\u00e9") == r"\\u0041\x{00e9}"
    )  # an escaped backslash stays one


def test_a_reply_of_braces_or_deep_nesting_is_a_parse_failure_and_a_late_object_is_still_found():
    from parallax.runtime.structured_call import extract_json

    with pytest.raises(ParseFailure):
        extract_json(
            '{"a":' * 4_000 + "#"
        )  # deeper than the decoder goes: once a RecursionError out of the node
    with pytest.raises(ParseFailure):
        extract_json("{" * LONG)
    assert extract_json("{" * LONG + '{"answer": 12}') == {"answer": 12}


def test_a_pattern_whose_program_is_too_large_is_refused_and_a_large_enough_one_runs():
    with pytest.raises(
        SchemaProblem,
        match=r"compiles to a program too large to run, which this server does not run",
    ):
        checked_schema(
            _field(r"\pL{1000}")
        )  # every letter of Unicode, a thousand times: over RE2's 1 MiB here
    schema = _field(r"^[a-z]{1000}$")
    checked_schema(schema)
    assert validation_errors(schema, {"code": "q" * 1_000}) == []
