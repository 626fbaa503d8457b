"""What a vote's requests will cost at this run, gathered before its first wave; the cheapest plan.

See docs/internals/votes.md#a-votes-plan-priced.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from parallax.logic.branch_plans import adaptive, branch_prompts
from parallax.logic.routing import votes_of
from parallax.logic.vote_plan import MAX_PLANNED, Pricing, fit_weights, plans
from parallax.runtime import chat_models
from parallax.runtime import settings as settings_mod
from parallax.runtime.prices import price_of, price_table
from parallax.runtime.services import Services
from parallax.runtime.token_count import as_dicts, estimate
from parallax.state.context import Context, setting
from parallax.state.solve import SolveState

REPLY_TOKENS_GUESS = 60
"""Reply tokens of a vote before the model has been seen to vote (a short working and the answer).
"""
UNKNOWN_CACHE_HIT = 0.5
"""The cached share of a repeated prompt assumed before the endpoint has shown whether it caches:
the expected cost is linear in it, and a wrong guess either way costs least from the middle (a plan
for a cache that is not there pays later requests in full; one for no cache pays every vote at
once)."""


async def vote_plan(state: SolveState, ctx: Context, services: Services) -> dict[str, Any] | None:
    """The plan of this run's vote, with what it was priced on; None when the run is not an adaptive
    vote, or asks more votes than are planned (MAX_PLANNED: it keeps today's waves)."""
    if not adaptive(state, ctx):
        return None
    votes = votes_of(state)
    if votes > MAX_PLANNED:
        return None
    current = settings_mod.load()
    models = ctx.models_for_votes(votes)
    model = vote_model(ctx)
    messages = branch_prompts(state)[("vote", 0)]
    base_url = "" if ctx.chat_model is not None else await chat_models.endpoint(current)
    if base_url:
        counted = await services.counter_for(base_url, model, current.api_key).count(messages)
        prompt, method = counted.tokens, counted.method
    else:  # a chat model handed in (tests, benchmarks without an endpoint)
        prompt, method = estimate(as_dicts(messages)), "estimate"
    seen = list(services.votes_seen[model])
    replies = [tokens for _, tokens in seen if tokens > 0]
    reply = (
        statistics.mean(replies)
        if replies
        else float(min(REPLY_TOKENS_GUESS, setting(ctx.max_tokens)))
    )
    price = price_of(price_table(current), model)
    priced = price is not None and (price.input > 0 or price.output > 0)
    hit = services.seen[(base_url, model)].cache_hit()
    cached_price = (
        (price.cached_input if price.cached_input is not None else price.input)
        if price is not None
        else 0.0
    )
    if hit is None:
        hit = UNKNOWN_CACHE_HIT
    one_temperature = (
        setting(ctx.vote_temperature_min) == setting(ctx.vote_temperature_max)
        and len(set(models)) == 1
    )
    takes_n = one_temperature and bool(base_url) and services.takes_n.get((base_url, model), True)
    if priced and price is not None:
        pricing = Pricing(
            prompt, reply, price.input / 1e6, cached_price / 1e6, price.output / 1e6, hit, takes_n
        )
    else:  # no price (or free): planned by tokens, a cached one free, as a local server's work
        pricing = Pricing(prompt, reply, 1.0, 0.0, 1.0, hit, takes_n, unit="tokens")
    weights = fit_weights(counts for counts, _ in seen)
    # worked out once per vote size in a process (up to a second for 16 votes): off the event loop
    choices = await asyncio.to_thread(
        functools.partial(
            plans,
            votes,
            pricing,
            weights,
            threshold=setting(ctx.vote_stop_threshold),
            first_wave=setting(ctx.vote_first_wave),
            min_leader=state.get("min_votes") or 0,
        )
    )
    asked = setting(ctx.vote_plan)
    chosen = choices[asked]
    return {
        "plan": asked,
        "first_wave": chosen.first_wave,
        "min_wave": chosen.min_wave,
        "unit": pricing.unit,
        "expected_cost": round(chosen.expected_cost, 10),
        "expected_votes": round(chosen.expected_votes, 3),
        "expected_requests": round(chosen.expected_requests, 3),
        "against": {
            name: {
                "first_wave": c.first_wave,
                "min_wave": c.min_wave,
                "expected_cost": round(c.expected_cost, 10),
                "expected_votes": round(c.expected_votes, 3),
                "expected_requests": round(c.expected_requests, 3),
            }
            for name, c in choices.items()
            if name != asked
        },
        "priced_on": {
            "prompt_tokens": prompt,
            "counted_by": method,
            "reply_tokens": round(reply, 1),
            "cache_hit": round(hit, 3),
            "takes_n": takes_n,
            "model": model,
            "votes_seen": len(seen),
        },
    }


def vote_model(ctx: Context) -> str:
    """The model a run's first vote asks (the one its plan is priced for)."""
    return ctx.models_for_votes(1)[0] or settings_mod.load().chat_model_name


def remember_vote(services: Services, model: str, records: Sequence[Mapping[str, Any]]) -> None:
    """A finished vote's answer counts and mean reply tokens, for the plans of the model's next
    votes."""
    ok = [
        r
        for r in records
        if r.get("kind") == "vote" and r.get("status") == "ok" and r.get("vote") is not None
    ]
    if not ok:
        return
    counts = tuple(sorted(Counter(str(r["vote"]) for r in ok).values(), reverse=True))
    replies = [int((r.get("tokens") or {}).get("completion") or 0) for r in ok]
    services.votes_seen[model].append((counts, statistics.mean(replies)))
