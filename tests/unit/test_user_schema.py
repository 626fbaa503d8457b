"""The user's output schema: what is refused, what branches are asked for, how values compare and
merge."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from parallax.logic.field_merge import Found, collect, merge_found, missing_required, verify
from parallax.logic.field_vote import vote_fields
from parallax.logic.slicing import split_pages
from parallax.logic.user_schema import (
    SchemaProblem,
    checked_schema,
    normal,
    quoted,
    reply_model,
    slice_schema,
)
from parallax.runtime.failure_cause import ParseFailure
from parallax.runtime.structured_call import parse_reply, response_format

FILING = {
    "type": "object",
    "properties": {
        "revenue": {"type": "number"},
        "currency": {"type": "string"},
        "segments": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["revenue", "currency"],
}


class Segment(BaseModel):
    name: str
    revenue: float | None = None


class Filing(BaseModel):
    company: str
    segments: list[Segment]
    auditor: str | None = None


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "strnig"}}},
            "not a valid JSON Schema at properties/a/type",
        ),
        ("revenue", "must be a JSON Schema object, got str"),
        ({"type": "string"}, "must describe an object with named fields"),
        (
            {"type": "object", "additionalProperties": {"type": "number"}},
            "output_schema is an object without named properties",
        ),
        (
            {
                "type": "object",
                "properties": {"m": {"type": "object", "additionalProperties": True}},
            },
            "field 'm' is an object without named properties",
        ),
        ({"type": "object", "properties": {"x": {}}}, "field 'x' has no type"),
        (
            {
                "type": "object",
                "properties": {
                    "x": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}
                },
            },
            "field 'x' is a list of lists",
        ),
        (
            {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}},
            "only local references",
        ),
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}},
            "which it does not define",
        ),
        (
            {
                "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
                "$ref": "#/$defs/N",
            },
            "recursive",
        ),
    ],
)
def test_schemas_branches_cannot_be_asked_for_are_refused_in_one_line(schema, says):
    with pytest.raises(SchemaProblem) as caught:
        checked_schema(schema)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_pydantic_models_schema_is_inlined_and_accepted():
    schema = checked_schema(Filing.model_json_schema())
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert schema["properties"]["segments"]["items"]["properties"]["name"]["type"] == "string"
    # the optional auditor (anyOf string/null) is one value, asked with a quote in a slice
    assert quoted(schema)["properties"]["auditor"]["required"] == ["quote", "value"]


def test_a_slice_is_asked_for_each_value_with_its_quote_and_no_field_required():
    asked = slice_schema(checked_schema(FILING))
    data = asked["properties"]["data"]
    assert "required" not in data
    assert data["properties"]["revenue"]["properties"]["value"] == {"type": "number"}
    assert data["properties"]["segments"]["items"]["required"] == ["quote", "value"]


def test_replies_are_validated_against_the_users_schema_and_re_asked_with_the_place_that_is_wrong():
    model = reply_model(
        {
            "type": "object",
            "properties": {"reasoning": {"type": "string"}, "data": FILING},
            "required": ["reasoning", "data"],
        },
        "TypedAnswer",
    )
    good = parse_reply('{"reasoning": "r", "data": {"revenue": 12.5, "currency": "USD"}}', model)
    assert good.model_dump()["data"] == {"revenue": 12.5, "currency": "USD"}
    with pytest.raises(ParseFailure, match="data.revenue: 'twelve' is not of type 'number'"):
        parse_reply('{"reasoning": "r", "data": {"revenue": "twelve", "currency": "USD"}}', model)
    with pytest.raises(ParseFailure, match="'currency' is a required property"):
        parse_reply('{"reasoning": "r", "data": {"revenue": 1}}', model)
    sent = response_format(model, "json_schema")
    assert sent["json_schema"]["schema"]["properties"]["data"] == FILING


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (144, "144"),
        ("144.0", 144),
        ("$1,200", 1200),
        ("fifteen", 15),
        ("  Digital   Media ", "digital media"),
        (True, "yes"),
        (["b", "A"], ["a", "B"]),
    ],
)
def test_one_value_in_several_spellings_is_one_value(a, b):
    assert normal(a) == normal(b)


def test_different_values_stay_apart():
    assert (
        normal(144) != normal(145)
        and normal("USD") != normal("EUR")
        and normal(["a"]) != normal(["a", "b"])
    )


def test_a_vote_settles_each_field_on_its_own_and_names_the_required_field_without_a_quorum():
    replies = [
        ("v1", {"revenue": 4796, "currency": "USD"}),
        ("v2", {"revenue": "4,796", "currency": "EUR"}),
        ("v3", {"revenue": 4796.0, "currency": "GBP"}),
        ("v4", {"revenue": 4796, "currency": "usd"}),
        ("v5", {"revenue": 12, "currency": "JPY"}),
    ]
    tally = vote_fields(FILING, replies, asked=5)
    assert tally.data == {"revenue": 4796}
    assert tally.unsettled_required == ["currency"]  # USD has 2 of 5: below the quorum of 3
    assert tally.confidence == 0.4  # the weakest required field: 2 of 5
    provenance = {p["path"]: p for p in tally.provenance()}
    assert provenance["revenue"]["support"] == 4 and provenance["revenue"]["verified"] is True
    assert "currency" not in provenance


def test_a_vote_with_every_required_field_at_quorum_is_settled():
    replies = [
        (f"v{i}", {"revenue": 10, "currency": c})
        for i, c in enumerate(["USD", "usd", "USD", "EUR"])
    ]
    tally = vote_fields(FILING, replies, asked=5)
    assert tally.data == {"revenue": 10, "currency": "USD"} and not tally.unsettled_required
    assert tally.confidence == 0.6


def test_pages_are_packed_into_slices_that_know_their_pages():
    pages = ["a" * 50, "b" * 50, "c" * 300, "", "d" * 20]
    slices, owners = split_pages(pages, 120)
    assert owners == [[1, 2], [3], [3], [3, 5]]  # page 3 cut in three, its tail packed with page 5
    assert slices[0] == "a" * 50 + "\n\n" + "b" * 50 and slices[-1] == "c" * 60 + "\n\n" + "d" * 20


def test_section_values_verify_against_their_slice_land_on_their_page_and_conflicts_are_reported():
    pages = [
        "Net revenue was 4,796 million dollars.",
        "Segments: Digital Media and Print.",
        "Restated: net revenue was 4,800 million.",
    ]
    slices, owners = split_pages(pages, 50)
    replies = [
        {"revenue": {"quote": "Net revenue was 4,796 million", "value": 4796}},
        {
            "segments": [
                {"quote": "Digital Media", "value": "Digital Media"},
                {"quote": "Digital Media and Print", "value": "Print"},
                {"quote": "Video", "value": "Video"},
            ]
        },
        {
            "revenue": {"quote": "net revenue was 4,800 million", "value": 4800},
            "segments": [{"quote": "Digital Media", "value": "digital media"}],
        },
    ]
    founds = [f for i, reply in enumerate(replies) for f in collect(FILING, reply, i, f"slice-{i}")]
    for found in founds:
        verify(found, slices, owners, pages)
    merged = merge_found(founds)
    assert merged.data["segments"] == [
        "Digital Media",
        "Print",
    ]  # "Video" has no quote in its slice
    assert (merged.checked, merged.verified, merged.dropped) == (6, 4, 2)
    assert merged.conflicts == [
        {
            "path": "revenue",
            "values": [
                {"value": 4796, "pages": [1], "slices": [0], "branch_ids": ["slice-0"]},
                {"value": 4800, "pages": [3], "slices": [2], "branch_ids": ["slice-2"]},
            ],
        }
    ]
    dropped = [p for p in merged.provenance if not p["verified"]]
    assert [d["value"] for d in dropped] == [
        "Video",
        "digital media",
    ]  # its quote is on page 2, not in slice 3
    assert "revenue" not in merged.data  # a disputed field is left out, not picked
    assert missing_required(FILING, merged.data) == ["revenue", "currency"]


def test_a_quote_from_another_slice_does_not_verify():
    found = Found("revenue", 1, ["only on page two"], 0, "slice-0")
    verify(
        found,
        ["page one text here", "only on page two"],
        [[1], [2]],
        ["page one text here", "only on page two"],
    )
    assert not found.verified and found.page is None


@pytest.mark.parametrize(
    ("value", "quote", "shown"),
    [
        (4796, "Total net revenue was 4,796 million", True),
        (4796000000, "revenue was 4,796 million", True),  # printed in millions
        (0.66, "a margin of 66%", True),  # printed as a percentage
        (-2.3, "a loss of (2.3)", True),
        (5275, "Total net revenue was 4,796 million", False),  # a misread figure with a true quote
        (4796, "revenue grew strongly", False),
    ],
)
def test_a_number_counts_only_if_its_quote_prints_it(value, quote, shown):
    from parallax.logic.quotes import number_shown

    assert number_shown(value, quote) is shown


def test_a_misread_figure_is_dropped_though_its_quote_is_in_the_slice():
    page = "Total current liabilities 2,213,556 2,088,582"
    found = Found("liabilities", 2434912, ["Total current liabilities 2,213,556"], 0, "slice-0")
    verify(found, [page], [[1]], [page])
    assert not found.verified


def test_a_quote_on_two_pages_of_its_slice_is_placed_where_it_stands_as_copied():
    pages = ["Contents: Consolidated Balance Sheets .... 53", "CONSOLIDATED BALANCE SHEETS\nAssets"]
    slices, owners = split_pages(pages, 500)
    found = Found("statements[]", "Balance sheets", ["CONSOLIDATED BALANCE SHEETS"], 0, "slice-0")
    verify(found, slices, owners, pages)
    assert found.verified and found.page == 2
