"""A vote's plan priced before it is asked (logic/vote_plan.py, logic/vote_pricing.py): the waves
that cost least at the run's prompt size, cache and prices, keeping the stopping rule's accuracy;
shown in the trace and `parallax trace`.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.logic.stopping import decide
from parallax.logic.vote_plan import DEFAULT_WEIGHTS, KINDS, Pricing, fit_weights, outcome, plans
from parallax.runtime.settings import reload_settings

MINI = (0.15e-6, 0.075e-6, 0.6e-6)
"""gpt-4o-mini: input, cached input, output (USD per token)."""


def plan_at(
    prompt: int, cache_hit: float, prices=MINI, reply: float = 30.0, takes_n: bool = True
) -> dict:
    return plans(
        8,
        Pricing(prompt, reply, *prices, cache_hit, takes_n),
        DEFAULT_WEIGHTS,
        threshold=0.93,
        first_wave=3,
    )


def test_a_later_wave_asks_at_least_min_wave():
    assert decide([4, 1], 5, 8, first_wave=3).next_wave == 3  # today's: at least the first wave's
    assert (
        decide([4, 1], 5, 8, first_wave=3, min_wave=1).next_wave == 1
    )  # the fewest that could settle it (5-1)
    assert decide([2, 1], 3, 8, first_wave=3, min_wave=8).next_wave == 5  # all the votes left


def test_the_expectations_are_exact_for_a_vote_that_always_agrees():
    agreeing = outcome(3, 3, 8, 0.93, 0, (1.0, 0.0))
    assert (agreeing.waves, agreeing.votes, agreeing.unsettled, agreeing.most_likely) == (
        1.0,
        3.0,
        0.0,
        1.0,
    )
    split = outcome(
        8, 8, 8, 0.93, 0, (0.5, 0.5)
    )  # one wave of 8 on a coin: the judge unless 5 or more agree
    assert split.waves == 1.0 and split.votes == 8.0
    assert split.unsettled == pytest.approx(1 - 2 * (56 + 28 + 8 + 1) / 256)


def test_small_prompts_keep_the_waves_and_large_uncached_prompts_ask_every_vote_at_once():
    small, large = plan_at(50, 0.0), plan_at(8000, 0.0)
    assert (
        small["priced"].first_wave == 3
        and small["priced"].expected_cost <= small["waves"].expected_cost
    )
    assert (
        large["priced"].first_wave == 8
    )  # a second request would cost more than the votes it saves
    assert large["priced"].expected_cost == pytest.approx(large["one_request"].expected_cost)


def test_in_between_the_priced_plan_costs_less_than_both():
    middle = plan_at(500, 0.0)
    assert middle["priced"].expected_cost < min(
        middle["waves"].expected_cost, middle["one_request"].expected_cost
    )
    assert (
        middle["priced"].most_likely >= middle["waves"].most_likely - 0.001
    )  # the stopping rule's accuracy kept


def test_a_cache_makes_later_waves_cheaper_and_the_plan_follows():
    uncached, cached = plan_at(2000, 0.0), plan_at(2000, 1.0, prices=(2e-6, 0.5e-6, 8e-6))
    assert uncached["priced"].first_wave == 8 and cached["priced"].first_wave < 8


def test_an_endpoint_that_refuses_n_pays_a_request_per_vote_so_waves_win():
    separate = plan_at(2000, 1.0, takes_n=False)
    assert separate["priced"].first_wave == 3
    assert separate["one_request"].expected_requests == pytest.approx(
        8 + separate["one_request"].expected_requests - 8
    )


def test_the_prior_follows_the_votes_seen():
    easy = fit_weights([(3,)] * 200)
    split = fit_weights([(3, 3, 1, 1)] * 200)
    agreeing = KINDS.index((0.98, 0.01))
    assert easy[agreeing] > DEFAULT_WEIGHTS[agreeing] > split[agreeing]


def test_a_vote_run_records_its_plan_and_parallax_trace_shows_it(billing, monkeypatch, tmp_path):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path))
    monkeypatch.setenv("PARALLAX_MODEL", "gpt-4o-mini")
    for bound in ("MIN", "MAX"):
        monkeypatch.setenv(f"PARALLAX_VOTE_TEMPERATURE_{bound}", "0.7")
    reload_settings()
    server = billing()
    page = " ".join(f"w{i}" for i in range(3000))
    runner = CliRunner()
    result = runner.invoke(
        app, ["run", f"{page}\n\nWhat is 6 times 7?", "--mode", "vote", "--votes", "8", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    plan = out["vote_plan"]
    assert (
        plan["plan"] == "priced"
        and plan["unit"] == "usd"
        and set(plan["against"]) == {"waves", "one_request"}
    )
    assert (
        plan["priced_on"]["counted_by"] == "endpoint:vllm"
        and plan["priced_on"]["prompt_tokens"] > 3000
    )
    assert plan["expected_cost"] <= min(c["expected_cost"] for c in plan["against"].values())
    assert [e["n"] for e in server.log()] == [
        plan["first_wave"]
    ]  # three agreeing votes settle, whatever the plan
    shown = runner.invoke(app, ["trace", out["trace_id"]])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert (
        "vote plan: priced (first wave" in text
        and "against waves (first wave 3, later waves at least 3)" in text
    )
    assert "counted by endpoint:vllm" in text


def test_the_plan_can_be_pinned_to_todays_waves_or_one_request(billing, monkeypatch, tmp_path):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path))
    for bound in ("MIN", "MAX"):
        monkeypatch.setenv(f"PARALLAX_VOTE_TEMPERATURE_{bound}", "0.7")
    monkeypatch.setenv("PARALLAX_VOTE_PLAN", "one_request")
    reload_settings()
    server = billing()
    out = json.loads(
        CliRunner()
        .invoke(app, ["run", "What is 6 times 7?", "--mode", "vote", "--votes", "8", "--json"])
        .stdout
    )
    assert out["vote_plan"]["plan"] == "one_request" and [e["n"] for e in server.log()] == [8]
