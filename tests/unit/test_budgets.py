"""Run budgets (logic/budget.py) against the scripted OpenAI-compatible server, which bills prompt characters / 4
per request: a run stops at its budget plus what was in flight, ends needs_review and says "budget reached"."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.plan import graph as plan_graph
from parallax.graphs.solve import graph as solve_graph
from parallax.runtime.chat_models import forget_clients
from parallax.runtime.settings import reload_settings
from parallax.state.context import Context
from tests.support.fault_server import FaultConfig, FaultServer

runner = CliRunner()


@pytest.fixture
def server(monkeypatch, tmp_path):
    server = FaultServer(FaultConfig(latency_ms=30))
    server.start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("PARALLAX_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path))
    monkeypatch.delenv("PARALLAX_PRICES", raising=False)
    reload_settings()
    forget_clients()
    try:
        yield server
    finally:
        server.stop()
        forget_clients()
        reload_settings()


def calls(server) -> int:
    return sum(entry["path"].endswith("/chat/completions") for entry in server.log())


def vote(votes: int, **budget) -> dict:
    return {"task": "What is 6 times 7? Give the number.", "mode": "vote", "votes": votes, **budget}


def run(graph, payload: dict, **context) -> dict:
    ctx = Context(straggler_factor=0.0, early_stop=False, **context)
    return asyncio.run(graph.ainvoke(payload, context=ctx))


def test_a_vote_stops_at_its_token_budget_plus_what_was_in_flight(server):
    one = run(solve_graph, vote(1))["spend"]["tokens"]  # what one vote costs on this server
    server.reset()
    out = run(solve_graph, vote(12, max_tokens=int(2.5 * one)), max_concurrency=2)
    made = calls(server)
    # the third call reaches 2.5 calls' worth; the two slots may hold one more each: never more than 3 + 2
    assert 3 <= made <= 5, made
    assert out["spend"]["tokens"] <= int(2.5 * one) + 2 * one
    refused = [b for b in out["branches"] if b.get("cause") == "budget"]
    assert len(refused) == 12 - made and all(b["status"] == "cancelled" for b in refused)
    assert out["status"] == "needs_review"
    assert out["reason"].startswith(f"budget reached: spent {out['spend']['tokens']} of max_tokens {int(2.5 * one)}")


def test_without_a_budget_the_same_vote_asks_every_vote(server):
    out = run(solve_graph, vote(12), max_concurrency=2)
    assert calls(server) == 12 and out["status"] == "ok" and "budget" not in out["reason"]
    assert out["spend"]["cost_usd"] > 0  # gpt-4o-mini has a default price


def test_a_cost_budget_stops_a_section_run_between_slices(server):
    text = "\n\n".join(f"Part {i}: revenue grew {i} percent in the year." * 12 for i in range(12))
    full = run(solve_graph, {"task": text, "question": "How did revenue grow?", "mode": "section"}, slice_chars=600,
               max_concurrency=2)
    slices = sum(b["kind"] == "slice" for b in full["branches"])
    per_slice = full["spend"]["cost_usd"] / slices
    server.reset()
    out = run(solve_graph, {"task": text, "question": "How did revenue grow?", "mode": "section",
                            "max_cost": 3 * per_slice}, slice_chars=600, max_concurrency=2)
    assert slices >= 8 and calls(server) <= 3 + 2
    assert out["status"] == "needs_review" and out["reason"].startswith("budget reached: spent $")
    assert out["spend"]["cost_usd"] <= 3 * per_slice + 2 * per_slice * 1.5


def test_an_adaptive_vote_asks_no_further_wave_past_its_budget(server):
    answers = itertools.count()
    server.config = FaultConfig(latency_ms=30, reply=lambda body: json.dumps(
        {"reasoning": "r", "answer": str(next(answers) % 3)}))  # three different answers: the vote cannot settle
    out = asyncio.run(solve_graph.ainvoke(vote(16, max_tokens=1), context=Context(straggler_factor=0.0, early_stop=True,
                                                                                    vote_first_wave=3)))
    assert calls(server) == 3  # the first wave (started under the budget), then no other
    assert out["votes_asked"] == 3 and "the next wave was not asked" in out["stop_reason"]
    assert out["status"] == "needs_review" and out["reason"].startswith("budget reached")


def test_a_cost_budget_with_a_model_that_has_no_price_stops_and_says_why(server, monkeypatch):
    monkeypatch.setenv("PARALLAX_MODEL", "my-llama")
    reload_settings()
    out = run(solve_graph, vote(6, max_cost=1.0), max_concurrency=1)
    assert calls(server) == 1  # the first call is made; its cost cannot be known, so the budget cannot be held
    assert out["spend"]["cost_usd"] is None and out["spend"]["unpriced"] == ["my-llama"]
    assert out["reason"].startswith("budget reached: cost unknown (no price for my-llama)")


def test_a_plan_checks_its_budget_before_each_task(server):
    plan = {"tasks": [{"id": i, "goal": f"What is {i} times 7?", "kind": "solve", "deps": [i - 1] if i > 1 else []}
                      for i in range(1, 7)], "synthesis": "concat"}
    payload = {"task": "Six steps.", "mode": "plan", "plan": plan, "max_replans": 0}
    one_task = run(plan_graph, {**payload, "plan": {**plan, "tasks": plan["tasks"][:1]}})["spend"]["tokens"]
    server.reset()
    out = run(plan_graph, {**payload, "max_tokens": 2 * one_task})
    statuses = [t["status"] for t in out["tasks"]]
    assert calls(server) <= 3  # a chain: one task in flight at a time
    assert statuses[:2] == ["DONE", "DONE"] and "SKIPPED" in statuses
    skipped = next(t for t in out["tasks"] if t["status"] == "SKIPPED")
    assert skipped["cause"] == "budget" and skipped["reason"].startswith("budget reached")
    assert out["status"] == "needs_review" and out["reason"].startswith("budget reached")


def test_the_cli_takes_a_budget_and_refuses_a_bad_one(server):
    result = runner.invoke(app, ["run", "What is 6 times 7?", "--mode", "vote", "--votes", "8", "--no-early-stop",
                                 "--concurrency", "1", "--max-tokens", "1", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == "needs_review" and out["reason"].startswith("budget reached: spent")
    assert calls(server) == 1 and out["spend"]["cost_usd"] > 0
    bad = runner.invoke(app, ["run", "What is 6 times 7?", "--max-cost", "0"])
    assert bad.exit_code == 2 and "--max-cost must be a number above 0 and at most 100000, got 0" in bad.output
    assert "Traceback" not in bad.output and calls(server) == 1


def test_the_python_api_takes_a_budget_and_reports_the_cost(server):
    import parallax

    result = parallax.solve("What is 6 times 7?", mode="vote", votes=8, max_tokens=1,
                            context=Context(early_stop=False, max_concurrency=1, straggler_factor=0.0))
    assert result.status == "needs_review" and result.reason.startswith("budget reached")
    assert result.tokens > 0 and result.cost_usd is not None and result.cost_usd > 0
    with pytest.raises(parallax.InvalidInput, match="max_tokens"):
        parallax.solve("What is 6 times 7?", max_tokens=0)
