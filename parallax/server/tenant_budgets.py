"""A tenant's daily budget at the graph API's door: 429 past it, else a run capped at what is left.

See docs/deploy.md#tenant-daily-budgets.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from parallax.logic import daily_budget
from parallax.logic.daily_budget import DaySpend
from parallax.runtime import settings as settings_mod
from parallax.runtime.storage.spend_ledger import BUDGETED_GRAPHS, SPEND_TODAY_SQL, SPENT_TODAY_SQL
from parallax.server import metrics
from parallax.server.connections import connection
from parallax.server.refusals import Refused
from parallax.state.records import Limits

CAPPED_GRAPHS = BUDGETED_GRAPHS
"""The graphs whose input takes a run budget: every graph that calls a model
(runtime/storage/spend_ledger.py)."""


async def spent_today(tenant: str) -> DaySpend:
    """What the tenant's finished runs were charged today (UTC), on every replica."""
    async with connection() as conn:
        row = await (await conn.execute(SPENT_TODAY_SQL, (tenant,))).fetchone()
    return (
        DaySpend()
        if row is None
        else DaySpend(int(row[0]), float(row[1]), int(row[2]), int(row[3]), bool(row[4]))
    )


async def admission(tenant: str) -> tuple[Refused | None, Limits | None]:
    """(the 429 to answer, None) past the budget; (None, what is left) under it; (None, None): no
    budget."""
    budget = settings_mod.load().daily_budget(tenant)
    if budget is None:
        return None, None
    spent = await spent_today(tenant)
    why = daily_budget.reached(budget, spent)
    if why is None:
        return None, daily_budget.remaining(budget, spent)
    now = datetime.now(UTC)
    body = daily_budget.refusal_body(tenant, why, now, budget, spent)
    return (
        Refused(
            429,
            str(body["message"]),
            kind=str(body["error"]),
            details=dict(body["details"]),
            headers={"Retry-After": str(daily_budget.retry_after_s(now))},
        ),
        None,
    )


async def refusal(tenant: str | None, face: str) -> Refused | None:
    """The 429 for a new run of `tenant` past its budget (counted under `face`), or None. Nothing is
    read when no budget is configured, nor outside `parallax serve` (no DATABASE_URL: langgraph
    dev)."""
    if tenant is None or "DATABASE_URL" not in os.environ or not settings_mod.load().daily_budgets:
        return None
    refused, _ = await admission(tenant)
    if refused is not None:
        metrics.BUDGET_REFUSALS.labels(face=face).inc()
    return refused


async def refresh_spend_metrics() -> None:
    """Today's spend of each tenant with a daily budget, for /metrics (one query; no budget: nothing
    read)."""
    budgets = settings_mod.load().tenant_daily_budgets
    if not budgets:
        return
    async with connection() as conn:
        rows = await (await conn.execute(SPEND_TODAY_SQL)).fetchall()
    seen = {str(tenant): (int(tokens), float(cost)) for tenant, tokens, cost in rows}
    for tenant in {*seen, *budgets} - {"*"}:
        if tenant in budgets or "*" in budgets:
            tokens, cost = seen.get(tenant, (0, 0.0))
            metrics.TENANT_SPEND_TOKENS.labels(tenant=tenant).set(tokens)
            metrics.TENANT_SPEND_USD.labels(tenant=tenant).set(cost)


def capped(graph: str | None, run_input: Any, left: Limits | None) -> Any:
    """The input of a budgeted graph's run capped at what the tenant has left today; any other input
    as it is."""
    if left is None or graph not in CAPPED_GRAPHS or not isinstance(run_input, dict):
        return run_input
    return daily_budget.capped(run_input, left)
