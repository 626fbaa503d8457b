"""The embedded llama.cpp server's own tokenizer counts a request's prompt before it is sent
(runtime/token_count.py): the count a run's budget holds is the count the server then reports, and a
budget smaller than the prompt is refused without a request."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from parallax.graphs.solve import graph as solve_graph
from parallax.runtime.token_count import Counter, as_dicts
from parallax.state.context import Context
from tests.integration.conftest import MODEL_ALIAS

pytestmark = pytest.mark.integration

MESSAGES = [
    SystemMessage("You answer questions about a filing. Reply in JSON."),
    HumanMessage(
        "Revenue grew 12% to $4.1 billion, margin 31.5%; debt fell by $200 million. What grew?"
    ),
]


def test_the_embedded_servers_tokenizer_counts_what_it_then_bills(real_model):
    counted = asyncio.run(Counter(real_model, MODEL_ALIAS).count(MESSAGES))
    assert counted.method == "endpoint:llama.cpp" and counted.exact
    reply = httpx.post(
        f"{real_model}/chat/completions",
        timeout=300,
        json={"model": MODEL_ALIAS, "messages": as_dicts(MESSAGES), "max_tokens": 8},
    ).json()
    # the server's usage counts the templated prompt; the count may add the start-of-text token it
    # would add itself
    assert counted.tokens - 1 <= reply["usage"]["prompt_tokens"] <= counted.tokens


def test_a_run_on_the_embedded_server_holds_its_budget_with_its_tokenizer(real_model):
    task = (
        "Revenue grew 12% to $4.1 billion while the margin reached 31.5%. " * 6
        + "By how much did revenue grow?"
    )
    ctx = Context(straggler_factor=0.0, max_tokens=64)
    refused = asyncio.run(
        solve_graph.ainvoke({"task": task, "mode": "direct", "max_tokens": 60}, context=ctx)
    )
    assert (
        refused["status"] == "needs_review" and "counted by endpoint:llama.cpp" in refused["reason"]
    )
    assert refused["spend"]["tokens"] == 0  # refused before any request
    held = asyncio.run(
        solve_graph.ainvoke(
            {"task": task, "mode": "vote", "votes": 3, "max_tokens": 420}, context=ctx
        )
    )
    assert held["spend"]["tokens"] <= 420
