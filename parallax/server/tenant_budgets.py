"""A tenant's daily budget at the door of the graph API: 429 past it, a run capped at what is left under it.

Who has a budget: PARALLAX_DAILY_BUDGETS (runtime/settings.py), per tenant or `*` for every tenant not
named, in USD and/or tokens; the day is the UTC day (logic/daily_budget.py). What a tenant spent today
is the sum its finished runs were charged, each once, by a trigger in PostgreSQL
(runtime/storage/spend_ledger.py): every replica reads the same row.

On each run creation (POST /threads/{id}/runs[/stream|/wait], /runs[/stream|/wait], cron creation
/runs/crons, /threads/{id}/runs/crons, and the v2 commands that start a run, `run.start` and
`input.respond`, on POST /threads/{id}/commands and the WebSocket, server/event_socket.py), for a caller
with a valid key and a budget, before anything is stored (the middleware sits outside double-texting,
webhooks and Aegra, inside the 422 checks):
- past the budget: 429, `Retry-After` the seconds to 00:00 UTC, the body Aegra's error shape with
  `error: "insufficient_quota"`, the reason and `details.resets_at` (ISO 8601 UTC). No run, no thread
  state, no cron, no webhook row;
- under it, the input of a run of any graph that calls a model (solve, plan, chat, learn, loop) gets
  `max_cost` / `max_tokens` at most what the tenant has left today (its own when smaller), so the run's own
  budget stops it there ("budget reached", logic/budget.py). A run resumed with a `command` and no input keeps the caps its thread
  was given when its input was last sent.
The runs crons start later pass no route: the cron-run trigger refuses and caps them the same way
(runtime/storage/platform_schema.py). The OpenAI face asks `refusal` before it creates its thread
(server/openai_face.py), and the graph API's check stays the one that holds.

The bound (docs/deploy.md, "Tenant daily budgets"): a run is admitted only while the day's charged spend
is under the budget and may itself spend at most what was left when it was admitted (plus what its own
model calls already in flight when its cap is reached). So the day ends at most at the budget plus what
the runs already in flight when the budget was crossed could still spend: each at most its cap, and
there are at most PARALLAX_MAX_PENDING of them per tenant (a few more for requests racing across replicas).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from starlette.responses import JSONResponse

from parallax.logic import daily_budget
from parallax.logic.daily_budget import DaySpend
from parallax.runtime import settings as settings_mod
from parallax.runtime.storage.spend_ledger import BUDGETED_GRAPHS, SPEND_TODAY_SQL, SPENT_TODAY_SQL
from parallax.server import metrics
from parallax.server.connections import connection
from parallax.server.protocol_requests import COMMANDS, RUN_COMMANDS
from parallax.server.run_checks import RUN_CREATE, graph_of
from parallax.server.run_requests import ASGIApp, Receive, Scope, Send, replay, tenant_request, with_length
from parallax.state.records import Limits

CAPPED_GRAPHS = BUDGETED_GRAPHS
"""The graphs whose input takes a run budget: every graph that calls a model (runtime/storage/spend_ledger.py)."""


@dataclass(frozen=True)
class Refused:
    """A run the tenant's daily budget refuses: the body and headers of the 429."""

    body: dict[str, Any]
    retry_after_s: int

    def response(self) -> JSONResponse:
        return JSONResponse(self.body, status_code=429, headers={"Retry-After": str(self.retry_after_s)})


async def spent_today(tenant: str) -> DaySpend:
    """What the tenant's finished runs were charged today (UTC), on every replica."""
    async with connection() as conn:
        row = await (await conn.execute(SPENT_TODAY_SQL, (tenant,))).fetchone()
    return DaySpend() if row is None else DaySpend(int(row[0]), float(row[1]), int(row[2]), int(row[3]), bool(row[4]))


async def admission(tenant: str) -> tuple[Refused | None, Limits | None]:
    """(the 429 to answer, None) past the budget; (None, what is left) under it; (None, None): no budget."""
    budget = settings_mod.load().daily_budget(tenant)
    if budget is None:
        return None, None
    spent = await spent_today(tenant)
    why = daily_budget.reached(budget, spent)
    if why is None:
        return None, daily_budget.remaining(budget, spent)
    now = datetime.now(UTC)
    return Refused(daily_budget.refusal_body(tenant, why, now, budget, spent), daily_budget.retry_after_s(now)), None


async def refusal(tenant: str | None, face: str) -> Refused | None:
    """The 429 for a new run of `tenant` past its budget (counted under `face`), or None. Nothing is read when
    no budget is configured, nor outside `parallax serve` (no DATABASE_URL: langgraph dev)."""
    if tenant is None or "DATABASE_URL" not in os.environ or not settings_mod.load().daily_budgets:
        return None
    refused, _ = await admission(tenant)
    if refused is not None:
        metrics.BUDGET_REFUSALS.labels(face=face).inc()
    return refused


async def refresh_spend_metrics() -> None:
    """Today's spend of each tenant with a daily budget, for /metrics (one query; no budget: nothing read)."""
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


async def admit_command(tenant: str, command: dict[str, Any]) -> Refused | None:
    """The 429 for a v2 command that would start a run of a tenant past its budget; under it, a `run.start` of a
    budgeted graph has its input capped (in place). None for other commands, or no budget."""
    if command.get("method") not in RUN_COMMANDS or not settings_mod.load().daily_budgets:
        return None
    refused, left = await admission(tenant)
    if refused is not None:
        return refused
    params = command.get("params")
    if left is not None and isinstance(params, dict) and isinstance(params.get("input"), dict) \
            and await graph_of(params.get("assistant_id")) in CAPPED_GRAPHS:
        params["input"] = daily_budget.capped(params["input"], left)
    return None


class DailyBudgets:
    """The middleware (server/app.py adds it just inside the 422 checks of server/run_checks.py)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        post, path = scope["type"] == "http" and scope.get("method") == "POST", scope.get("path", "")
        create = RUN_CREATE.match(path) if post else None
        command = COMMANDS.match(path) if post else None
        if (create is None and command is None) or not settings_mod.load().daily_budgets:
            await self.app(scope, receive, send)
            return
        if (request := await tenant_request(self.app, scope, receive, send)) is None:
            return
        body, payload, tenant = request
        if command is not None:
            refused = await admit_command(tenant, payload)
            if refused is not None:
                metrics.BUDGET_REFUSALS.labels(face="graph_api").inc()
                await refused.response()(scope, receive, send)
                return
            body = json.dumps(payload).encode()
            await self.app(with_length(scope, len(body)), replay(body, receive), send)
            return
        refused, left = await admission(tenant)
        if refused is not None:
            metrics.BUDGET_REFUSALS.labels(face="graph_api").inc()
            await refused.response()(scope, receive, send)
            return
        is_cron = scope["path"].rstrip("/").endswith("/crons")  # its runs are capped as they are created (trigger)
        if left is not None and not is_cron and isinstance(payload.get("input"), dict) \
                and await graph_of(payload.get("assistant_id")) in CAPPED_GRAPHS:
            payload["input"] = daily_budget.capped(payload["input"], left)
            body = json.dumps(payload).encode()
        await self.app(with_length(scope, len(body)), replay(body, receive), send)
