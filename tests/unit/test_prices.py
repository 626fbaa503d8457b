"""The price table (runtime/prices.py) and a run's spend (logic/spend.py): what a user sets is what
a branch costs, and a model without a price is unknown, never free."""

from __future__ import annotations

import json

import pytest

from parallax.logic.spend import cost_text, spend_of
from parallax.runtime.prices import DEFAULT_PRICES, PRICES_DATE, branch_cost, price_of, price_table
from parallax.runtime.settings import EMBEDDED_MODEL, SettingsError, read


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path))
    monkeypatch.delenv("PARALLAX_PRICES", raising=False)
    return tmp_path


def test_defaults_are_dated_and_the_embedded_model_is_free(home):
    table = price_table(read())
    assert PRICES_DATE == "2025-06-01" and table["gpt-4o-mini"] == DEFAULT_PRICES["gpt-4o-mini"]
    # 1,000 prompt tokens and 200 completion tokens of gpt-4o-mini: $0.15 and $0.60 per million
    assert branch_cost(table, "gpt-4o-mini", {"prompt": 1000, "completion": 200}) == pytest.approx(
        0.00027
    )
    assert branch_cost(table, EMBEDDED_MODEL, {"prompt": 5000, "completion": 300}) == 0.0


def test_cached_prompt_tokens_are_billed_at_the_cached_rate(home):
    table = price_table(read())
    # 800 of the 1,000 prompt tokens came from the provider's cache: 200 x 0.15 + 800 x 0.075 per
    # million
    assert branch_cost(
        table, "gpt-4o-mini", {"prompt": 1000, "completion": 0, "cached": 800}
    ) == pytest.approx(0.00009)


def test_a_dated_model_name_finds_its_model_and_an_unknown_model_has_no_price(home):
    table = price_table(read())
    assert price_of(table, "gpt-4o-2024-08-06") == DEFAULT_PRICES["gpt-4o"]
    assert branch_cost(table, "my-llama", {"prompt": 10, "completion": 5}) is None
    assert (
        branch_cost(table, "my-llama", {"prompt": 0, "completion": 0}) == 0.0
    )  # nothing spent costs nothing


def test_the_environment_and_the_homes_file_set_prices(home, monkeypatch):
    (home / "prices.json").write_text(
        json.dumps(
            {"my-llama": {"input": 1, "output": 2}, "gpt-4o-mini": {"input": 9, "output": 9}}
        )
    )
    monkeypatch.setenv(
        "PARALLAX_PRICES",
        json.dumps({"gpt-4o-mini": {"input": 0.1, "cached_input": 0.05, "output": 0.4}}),
    )
    table = price_table(read())
    assert branch_cost(
        table, "my-llama", {"prompt": 1_000_000, "completion": 1_000_000}
    ) == pytest.approx(3.0)
    assert table["my-llama"].cached_input == 1  # cached input defaults to the input rate
    assert table["gpt-4o-mini"].input == 0.1  # the variable wins over the file
    assert table["gpt-4o"] == DEFAULT_PRICES["gpt-4o"]  # what neither names keeps its default


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("{not json", "PARALLAX_PRICES is not JSON"),
        ('{"m": {"input": -1, "output": 1}}', "PARALLAX_PRICES: model 'm', input"),
        ('{"m": {"input": 1}}', "PARALLAX_PRICES: model 'm', output"),
        ("[1, 2]", "PARALLAX_PRICES must be a JSON object"),
    ],
)
def test_a_bad_price_table_says_what_is_wrong(home, monkeypatch, value, says):
    monkeypatch.setenv("PARALLAX_PRICES", value)
    with pytest.raises(SettingsError) as caught:
        price_table(read())
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)


def test_a_runs_cost_is_unknown_when_one_branch_has_no_price():
    priced = {
        "id": "a",
        "model": "gpt-4o-mini",
        "tokens": {"prompt": 100, "completion": 10, "total": 110},
        "cost_usd": 0.002,
    }
    unpriced = {
        "id": "b",
        "model": "my-llama",
        "tokens": {"prompt": 50, "completion": 5, "total": 55},
        "cost_usd": None,
    }
    free = {"id": "c", "kind": "safety", "tokens": {"prompt": 0, "completion": 0, "total": 0}}
    assert spend_of([priced, free]) == {
        "tokens": 110,
        "prompt_tokens": 100,
        "cached_tokens": 0,
        "completion_tokens": 10,
        "cost_usd": 0.002,
        "unpriced": [],
    }
    spent = spend_of([priced, unpriced, free])
    assert (
        spent["cost_usd"] is None and spent["unpriced"] == ["my-llama"] and spent["tokens"] == 165
    )
    assert cost_text(spent) == "unknown (no price for my-llama: set PARALLAX_PRICES)"
    assert cost_text(spend_of([priced])) == "$0.0020"
