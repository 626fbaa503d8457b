"""A tenant's daily budget: what is left today, why a run is refused, when the day resets.

See docs/deploy.md#tenant-daily-budgets and docs/internals/runs.md#budgets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from parallax.state.records import Limits


@dataclass(frozen=True)
class DaySpend:
    """What a tenant's finished runs were charged on one UTC day."""

    tokens: int = 0
    cost_usd: float = 0.0
    runs: int = 0
    unpriced_runs: int = 0
    """Runs whose cost is unknown (their tokens are counted, their cost is not)."""
    exhausted: bool = False
    """A run stopped by a cap at least what the day had left: what is left cannot pay for a request
    (runtime/storage/spend_ledger.py `parallax_mark_exhausted`)."""


def next_reset(now: datetime) -> datetime:
    """The next 00:00 UTC after `now` (an aware datetime)."""
    today = now.astimezone(UTC).date()
    return datetime.combine(today + timedelta(days=1), time(0), tzinfo=UTC)


def retry_after_s(now: datetime) -> int:
    """Whole seconds until the reset, at least 1 (the Retry-After header)."""
    return max(1, math.ceil((next_reset(now) - now).total_seconds()))


def reset_text(now: datetime) -> str:
    """The reset as ISO 8601 UTC: `2026-12-04T00:00:00Z`."""
    return next_reset(now).strftime("%Y-%m-%dT%H:%M:%SZ")


def reached(budget: Limits, spent: DaySpend) -> str | None:
    """Why the day's budget is reached ("daily budget reached: ..."), or None while there is some
    left."""
    max_cost, max_tokens = budget.get("max_cost"), budget.get("max_tokens")
    if (
        spent.exhausted
    ):  # every request is held at its worst case, so a day is seldom spent to the last token
        return (
            "daily budget reached: a run could not pay for its next request with what was left"
            f" today (${spent.cost_usd:.6f} and {spent.tokens} tokens spent)"
        )
    if max_cost is not None and spent.unpriced_runs:
        return (
            f"daily budget reached: {spent.unpriced_runs} run(s) today used a model without a"
            f" price, so the daily max_cost ${max_cost:g} cannot be held (set PARALLAX_PRICES)"
        )
    if (
        max_cost is not None and round(max_cost - spent.cost_usd, 8) <= 0
    ):  # what is left rounds as a run's cap does
        return (
            f"daily budget reached: spent ${spent.cost_usd:.6f} of ${max_cost:g} today"
            f" ({spent.tokens} tokens)"
        )
    if max_tokens is not None and spent.tokens >= max_tokens:
        return f"daily budget reached: spent {spent.tokens} of {max_tokens} tokens today"
    return None


def remaining(budget: Limits, spent: DaySpend) -> Limits:
    """What is left of each limit the budget sets (call only while `reached` is None: each is then
    above 0)."""
    left: Limits = {}
    if (max_cost := budget.get("max_cost")) is not None:
        left["max_cost"] = round(max_cost - spent.cost_usd, 8)
    if (max_tokens := budget.get("max_tokens")) is not None:
        left["max_tokens"] = max_tokens - spent.tokens
    return left


def capped(run_input: dict[str, Any], left: Limits) -> dict[str, Any]:
    """A run's input (of any graph that calls a model) whose own `max_cost` / `max_tokens` are at
    most what the tenant has left today (a run asking for less keeps its own)."""
    out = dict(run_input)
    for key in ("max_cost", "max_tokens"):
        if key not in left:
            continue
        limit: float = left[key]
        own = out.get(key)
        if not isinstance(own, int | float) or isinstance(own, bool) or own > limit:
            out[key] = limit
    return out


def refusal_body(
    tenant: str, why: str, now: datetime, budget: Limits, spent: DaySpend
) -> dict[str, Any]:
    """The graph API's 429 body (Aegra's error shape: error, message, details)."""
    resets = reset_text(now)
    return {
        "error": "insufficient_quota",
        "message": f"tenant {tenant!r}: {why}; the budget resets at {resets} (00:00 UTC)",
        "details": {
            "reason": why,
            "resets_at": resets,
            "tenant": tenant,
            "budget": dict(budget),
            "spent": {
                "tokens": spent.tokens,
                "cost_usd": round(spent.cost_usd, 8),
                "runs": spent.runs,
                "unpriced_runs": spent.unpriced_runs,
            },
        },
    }
