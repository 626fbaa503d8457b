"""Counting a request's prompt before it is sent (runtime/token_count.py) and holding its worst case
against a budget (runtime/request_budget.py)."""

from __future__ import annotations

import asyncio
import math

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from parallax.runtime.prices import Price
from parallax.runtime.request_budget import (
    BudgetRefused,
    Purse,
    Worst,
    holding,
    keep_worst,
    reserve,
    settle,
)
from parallax.runtime.token_count import (
    CHARS_PER_TOKEN_BOUND,
    Counter,
    as_dicts,
    estimate,
    openai_count,
    server_root,
)
from testkit.billing_server import Pricing

MESSAGES = [
    SystemMessage("You answer in JSON."),
    HumanMessage("What is six times seven? Think, then answer."),
]
PRICE = Price(input=1.0, cached_input=0.5, output=4.0)


class Words:
    """A stand-in tiktoken encoding: a token per word."""

    def encode(self, text: str) -> list[str]:
        return text.split()


def test_the_estimate_is_characters_over_three_and_a_bound_per_message():
    sent = as_dicts(MESSAGES)
    chars = sum(len(m["content"]) + len(m["role"]) for m in sent)
    assert estimate(sent) == math.ceil(chars / CHARS_PER_TOKEN_BOUND) + 8 * 2 + 3
    assert (
        server_root("http://host:8000/v1/") == "http://host:8000"
        and server_root("http://h/x") == "http://h/x"
    )


def test_openai_messages_are_counted_as_openai_counts_them_schema_included():
    sent = as_dicts(MESSAGES)
    words = sum(len(m["content"].split()) + 1 for m in sent)
    assert openai_count(Words(), sent) == 3 + 3 * 2 + words
    assert openai_count(Words(), sent, {"type": "object"}) == openai_count(Words(), sent) + 1


def test_the_endpoints_tokenizer_is_found_and_counts_what_it_bills(billing):
    server = billing()
    counted = asyncio.run(Counter(server.url, "m").count(MESSAGES))
    assert counted.method == "endpoint:vllm" and counted.exact
    assert counted.tokens == sum(
        len(f"{m['role']}: {m['content']}".split()) for m in as_dicts(MESSAGES)
    )
    server.reset(Pricing(tokenize=False))
    fallback = asyncio.run(Counter(server.url, "m").count(MESSAGES))
    assert (
        fallback.method == "estimate"
        and not fallback.exact
        and fallback.tokens == estimate(as_dicts(MESSAGES))
    )


def test_openais_api_is_counted_with_tiktoken_or_estimated_when_it_cannot_load(monkeypatch):
    import tiktoken

    monkeypatch.setattr(tiktoken, "encoding_for_model", lambda model: Words())
    counted = asyncio.run(
        Counter("https://api.openai.com/v1", "gpt-4o-mini").count(MESSAGES, {"type": "object"})
    )
    assert counted.method == "tiktoken" and counted.tokens == openai_count(
        Words(), as_dicts(MESSAGES), {"type": "object"}
    )

    def offline(model: str) -> None:
        raise ConnectionError("no route to the encoding's host")

    monkeypatch.setattr(tiktoken, "encoding_for_model", offline)
    counted = asyncio.run(Counter("https://api.openai.com/v1", "gpt-4o-mini").count(MESSAGES))
    assert counted.method == "estimate"


def test_a_request_is_shrunk_to_fewer_choices_then_a_lower_cap_then_refused():
    purse = Purse({"max_tokens": 1000})
    with holding(purse):
        hold, choices, cap = reserve(Worst(400, 8, 100, "endpoint", PRICE), ["a", "b"])
        assert (choices, cap) == (6, 100) and purse.held_tokens == 1000  # 400 + 6 x 100
        settle(hold, {"prompt": 400, "completion": 90, "cached_tokens": 0}, PRICE, "m")
        assert (purse.tokens, purse.held_tokens) == (490, 0) and purse.counted == {"a", "b"}
        _, choices, cap = reserve(Worst(400, 3, 200, "endpoint", PRICE), ["c"])
        assert (choices, cap) == (1, 110)  # 400 + 110 = 510 = what is left
        with pytest.raises(
            BudgetRefused, match=r"max_tokens 1000 \(490 spent, 510 in flight, 0 left\)"
        ):
            reserve(Worst(10, 1, 100, "estimate", PRICE), ["d"])


def test_a_request_cancelled_in_flight_keeps_its_worst_case_and_every_purse_held_is_charged():
    outer, inner, counter = Purse({"max_cost": 1.0}), Purse({"max_tokens": 10_000}), Purse()
    with holding(outer), holding(inner, counter, outer):  # a purse held twice is held once
        hold, _, _ = reserve(Worst(1000, 2, 100, "endpoint", PRICE), ["x"])
        assert hold.purses == [outer, inner, counter]
        keep_worst(hold, "m")
    assert inner.tokens == counter.tokens == 1200 and outer.cost == pytest.approx(
        (1000 * 1.0 + 200 * 4.0) / 1e6
    )


def test_a_cost_budget_cannot_hold_a_model_without_a_price():
    with holding(Purse({"max_cost": 1.0})), pytest.raises(BudgetRefused, match="cost unknown"):
        reserve(Worst(10, 1, 10, "estimate", None), [])
