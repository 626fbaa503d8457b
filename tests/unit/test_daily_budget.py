"""A tenant's daily budget: how the operator writes it, when it is reached, what a run is capped at,
when it resets.

The served behaviour (429 on the graph API and /v1, the charge made once per run, two replicas at
once) is tested against a real deployment in tests/integration/test_tenant_budgets.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from parallax.logic import daily_budget
from parallax.logic.daily_budget import DaySpend
from parallax.runtime import settings as settings_mod


def budgets(monkeypatch, spec: str) -> settings_mod.Settings:
    monkeypatch.setenv("PARALLAX_DAILY_BUDGETS", spec)
    settings_mod.reload_settings()
    return settings_mod.load()


def test_the_operator_writes_usd_tokens_or_both_per_tenant_and_a_default_for_the_rest(monkeypatch):
    settings = budgets(monkeypatch, "acme:5usd, beta:200000tokens,gamma:2.5usd+1000tokens,*:1usd")
    assert settings.tenant_daily_budgets == {
        "acme": {"max_cost": 5.0},
        "beta": {"max_tokens": 200000},
        "gamma": {"max_cost": 2.5, "max_tokens": 1000},
        "*": {"max_cost": 1.0},
    }
    assert settings.daily_budget("beta") == {"max_tokens": 200000}
    assert settings.daily_budget("someone-else") == {"max_cost": 1.0}
    assert budgets(monkeypatch, "acme:5usd").daily_budget("someone-else") is None


@pytest.mark.parametrize(
    "spec",
    [
        "acme",
        "acme:5",
        "acme:5eur",
        "acme:0usd",
        "acme:1.5tokens",
        "ac me:5usd",
        "acme:5usd,acme:6usd",
        "acme:5usd+",
    ],
)
def test_a_bad_budget_says_what_it_should_look_like(monkeypatch, spec):
    with pytest.raises(
        settings_mod.SettingsError, match=r"PARALLAX_DAILY_BUDGETS entry \d .*5usd, 200000tokens"
    ):
        budgets(monkeypatch, spec).tenant_daily_budgets  # noqa: B018


def test_a_budget_is_reached_at_its_limit_and_an_unknown_cost_cannot_be_held():
    assert daily_budget.reached({"max_cost": 1.0}, DaySpend(tokens=10**9, cost_usd=0.99)) is None
    assert "spent $1.000000 of $1" in daily_budget.reached(
        {"max_cost": 1.0}, DaySpend(cost_usd=1.0)
    )
    assert "spent 100 of 100 tokens" in daily_budget.reached(
        {"max_tokens": 100}, DaySpend(tokens=100, cost_usd=0)
    )
    assert (
        daily_budget.reached({"max_tokens": 100}, DaySpend(tokens=99, unpriced_runs=3)) is None
    )  # tokens are known
    assert "without a price" in daily_budget.reached(
        {"max_cost": 1.0}, DaySpend(tokens=5, unpriced_runs=1)
    )


def test_a_run_is_capped_at_what_is_left_unless_it_asked_for_less():
    left = daily_budget.remaining(
        {"max_cost": 1.0, "max_tokens": 1000}, DaySpend(tokens=400, cost_usd=0.25)
    )
    assert left == {"max_cost": 0.75, "max_tokens": 600}
    assert daily_budget.capped({"task": "t"}, left) == {
        "task": "t",
        "max_cost": 0.75,
        "max_tokens": 600,
    }
    assert daily_budget.capped({"task": "t", "max_cost": 0.1, "max_tokens": 5000}, left) == {
        "task": "t",
        "max_cost": 0.1,
        "max_tokens": 600,
    }
    assert daily_budget.capped(
        {"task": "t"}, daily_budget.remaining({"max_tokens": 10}, DaySpend())
    ) == {"task": "t", "max_tokens": 10}


def test_the_day_resets_at_utc_midnight_whatever_the_zone_of_the_clock():
    from datetime import timedelta, timezone

    late = datetime(2026, 12, 3, 23, 59, 30, 500000, tzinfo=UTC)
    assert (
        daily_budget.reset_text(late) == "2026-12-04T00:00:00Z"
        and daily_budget.retry_after_s(late) == 30
    )
    tokyo = datetime(2026, 12, 4, 8, 0, tzinfo=timezone(timedelta(hours=9)))  # 23:00 UTC on the 3rd
    assert (
        daily_budget.reset_text(tokyo) == "2026-12-04T00:00:00Z"
        and daily_budget.retry_after_s(tokyo) == 3600
    )
    body = daily_budget.refusal_body(
        "acme", "daily budget reached: x", late, {"max_cost": 1.0}, DaySpend(cost_usd=1.2)
    )
    assert (
        body["error"] == "insufficient_quota"
        and body["details"]["resets_at"] == "2026-12-04T00:00:00Z"
    )
    assert "resets at 2026-12-04T00:00:00Z" in body["message"] and "'acme'" in body["message"]


def test_a_day_a_capped_run_could_not_pay_from_counts_as_reached():
    """Each request is held at its worst case, so a day is seldom spent to the last token: a run
    stopped by a cap of at least what was left marks the day exhausted
    (runtime/storage/spend_ledger.py), and the door refuses after.
    """
    from parallax.logic.daily_budget import reached
    from parallax.state.records import Limits

    budget: Limits = {"max_tokens": 2500}
    assert reached(budget, DaySpend(tokens=2400)) is None
    why = reached(budget, DaySpend(tokens=2400, exhausted=True))
    assert why is not None and why.startswith(
        "daily budget reached: a run could not pay for its next request"
    )
