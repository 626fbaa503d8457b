"""A vote's plan priced before it is asked: the votes each wave asks, for the least expected cost.

See docs/internals/votes.md#a-votes-plan-priced.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from parallax.logic.stopping import decide

KINDS: tuple[tuple[float, float], ...] = (
    (0.98, 0.01),
    (0.92, 0.05),
    (0.85, 0.1),
    (0.75, 0.15),
    (0.65, 0.25),
    (0.55, 0.35),
    (0.45, 0.4),
    (0.4, 0.2),
    (0.3, 0.15),
)
"""Question kinds: (p1, p2), the chance a vote gives the most likely answer and the runner-up."""
DEFAULT_WEIGHTS = (0.3, 0.15, 0.1, 0.1, 0.1, 0.08, 0.07, 0.05, 0.05)
"""The prior before the process has seen its model vote: most questions settle on one answer, some
split. A starting point only (stated here, measured nowhere): `fit_weights` moves it toward what the
votes show."""
PRIOR_STRENGTH = 20.0
"""How many seen votes the default prior weighs as (pseudo-counts)."""
MAX_PLANNED = 16
"""Votes beyond this are not planned (they keep today's waves): the exact expectation grows with the
votes' cube."""
ACCURACY_SLACK = 0.001
JUDGE_REPLY_TOKENS = 60


@dataclass(frozen=True)
class Pricing:
    """What a vote's requests cost at this run: USD per token (or 1 per token for a model without a
    price)."""

    prompt_tokens: int
    reply_tokens: float
    input: float
    cached: float
    output: float
    cache_hit: float
    """The share of a repeated prompt the endpoint serves from its cache (0: no cache)."""
    takes_n: bool
    unit: str = "usd"
    """usd, or tokens (a model without a price)."""

    @property
    def repeat(self) -> float:
        """Per prompt token of a later request: the cached share at the cached price, the rest in
        full."""
        return self.cache_hit * self.cached + (1 - self.cache_hit) * self.input


@dataclass(frozen=True)
class Outcome:
    """A plan's expectations for one question kind."""

    waves: float
    votes: float
    unsettled: float
    """P(the vote ends without a winner, so the judge is asked)."""
    most_likely: float
    """P(the vote ends on the kind's most likely answer)."""


@dataclass(frozen=True)
class PlanChoice:
    """A plan and what it is expected to cost and do, per question at this run's prompt."""

    name: str
    first_wave: int
    min_wave: int
    expected_cost: float
    expected_votes: float
    expected_requests: float
    most_likely: float

    def as_dict(self) -> dict[str, Any]:
        return {k: round(v, 10) if isinstance(v, float) else v for k, v in asdict(self).items()}


@functools.lru_cache(maxsize=4096)
def _multinomial(w: int, p1: float, p2: float) -> list[tuple[int, int, int, float]]:
    """(da, db, do, probability) of a wave of `w` votes."""
    q = max(0.0, 1.0 - p1 - p2)
    out = []
    for da in range(w + 1):
        for db in range(w - da + 1):
            do = w - da - db
            prob = math.comb(w, da) * math.comb(w - da, db) * p1**da * p2**db * q**do
            if prob > 1e-12:
                out.append((da, db, do, prob))
    return out


@functools.lru_cache(maxsize=4096)
def outcome(
    first_wave: int,
    min_wave: int,
    votes: int,
    threshold: float,
    min_leader: int,
    kind: tuple[float, float],
) -> Outcome:
    """The exact expectations of plan (first_wave, min_wave) on questions of `kind`, the stopping
    rule deciding after each wave (logic/stopping.py `decide`)."""
    p1, p2 = kind
    waves = asked = unsettled = most_likely = 0.0
    size = min(votes, max(first_wave, min_leader))
    pending: dict[tuple[tuple[int, int, int], int], float] = {((0, 0, 0), size): 1.0}
    while pending:
        after: dict[tuple[int, int, int], float] = {}
        for (state, w), prob in pending.items():
            waves += prob
            asked += prob * w
            a, b, o = state
            for da, db, do, p in _multinomial(w, p1, p2):
                key = (a + da, b + db, o + do)
                after[key] = after.get(key, 0.0) + prob * p
        pending = {}
        for (a, b, o), prob in after.items():
            stop, _, next_wave = _decision(
                a, b, o, votes, threshold, first_wave, min_wave, min_leader
            )
            if stop:
                if not _has_winner(
                    a, b, o, min_leader
                ):  # the merge finds no quorum: the judge is asked
                    unsettled += prob
                most_likely += prob * (
                    1.0 if a > max(b, 1 if o else 0) else 0.5 if a == b and a else 0.0
                )
            else:
                key2 = ((a, b, o), next_wave)
                pending[key2] = pending.get(key2, 0.0) + prob
    return Outcome(waves, asked, unsettled, most_likely)


def _has_winner(a: int, b: int, o: int, min_leader: int) -> bool:
    """Whether the merge's tally names a winner (logic/vote.py `tally_values`): the leader alone at
    the top with at least the quorum (`min_votes`, else a strict majority of the votes asked); else
    the judge is asked.
    """
    ranked = sorted([a, b, *([1] * o)], reverse=True) + [0]
    return ranked[0] >= (min_leader or (a + b + o) // 2 + 1) and ranked[0] > ranked[1]


@functools.lru_cache(maxsize=65536)
def _decision(
    a: int,
    b: int,
    o: int,
    votes: int,
    threshold: float,
    first_wave: int,
    min_wave: int,
    min_leader: int,
) -> tuple[bool, bool, int]:
    """(stop, settled, next wave) of the stopping rule after counts a, b and o lone answers."""
    counts = [c for c in (a, b) if c] + [1] * o
    decision = decide(
        counts,
        a + b + o,
        votes,
        threshold=threshold,
        first_wave=first_wave,
        min_wave=min_wave,
        min_leader=min_leader,
    )
    return decision.stop, decision.reason.startswith("settled"), decision.next_wave


def fit_weights(
    seen: Iterable[Sequence[int]],
    prior: Sequence[float] = DEFAULT_WEIGHTS,
    strength: float = PRIOR_STRENGTH,
) -> list[float]:
    """The prior over KINDS moved toward the vote counts this process has seen (each a vote's answer
    counts, any order), by a few rounds of EM; the default prior weighs `strength` votes."""
    rows = []
    for counts in seen:
        ranked = sorted((int(c) for c in counts if c > 0), reverse=True)
        if not ranked:
            continue
        a, b, rest = ranked[0], ranked[1] if len(ranked) > 1 else 0, ranked[2:]
        o = sum(rest)
        likes = []
        for p1, p2 in KINDS:
            q = max(1e-9, 1 - p1 - p2)
            others = q**o * (0.5 ** sum(c - 1 for c in rest))  # a repeated other answer is unlikely
            likes.append((p1**a * p2**b + p1**b * p2**a) * others)
        rows.append(likes)
    weights = list(prior)
    for _ in range(12):
        totals = [strength * w for w in prior]
        for likes in rows:
            mixed = [w * like for w, like in zip(weights, likes, strict=True)]
            norm = sum(mixed) or 1.0
            for k, m in enumerate(mixed):
                totals[k] += m / norm
        whole = sum(totals)
        weights = [t / whole for t in totals]
    return weights


def price_plan(
    first_wave: int,
    min_wave: int,
    votes: int,
    pricing: Pricing,
    weights: Sequence[float],
    *,
    threshold: float,
    min_leader: int = 0,
    name: str = "",
) -> PlanChoice:
    """The expected cost and outcome of one plan."""
    waves = asked = unsettled = likely = 0.0
    for weight, kind in zip(weights, KINDS, strict=True):
        got = outcome(first_wave, min_wave, votes, threshold, min_leader, kind)
        waves += weight * got.waves
        asked += weight * got.votes
        unsettled += weight * got.unsettled
        likely += weight * got.most_likely
    p = pricing.prompt_tokens
    first = min(votes, max(first_wave, min_leader))
    if pricing.takes_n:
        requests, prompt_cost = waves, p * pricing.input + (waves - 1) * p * pricing.repeat
    else:  # a request per vote; the first wave's go out together, each billed in full
        requests, prompt_cost = (
            asked,
            first * p * pricing.input + (asked - first) * p * pricing.repeat,
        )
    cost = (
        prompt_cost
        + asked * pricing.reply_tokens * pricing.output
        + unsettled * (p * pricing.input + JUDGE_REPLY_TOKENS * pricing.output)
    )
    return PlanChoice(name, first_wave, min_wave, cost, asked, requests + unsettled, likely)


def plans(
    votes: int,
    pricing: Pricing,
    weights: Sequence[float],
    *,
    threshold: float,
    first_wave: int,
    min_leader: int = 0,
) -> dict[str, PlanChoice]:
    """Today's waves, all votes in one request, and the priced plan (the cheapest that keeps the
    waves' chance of ending on the most likely answer)."""

    def price(first: int, least: int, name: str = "") -> PlanChoice:
        return price_plan(
            first,
            least,
            votes,
            pricing,
            weights,
            threshold=threshold,
            min_leader=min_leader,
            name=name,
        )

    if votes > MAX_PLANNED:
        raise ValueError(
            f"a vote of {votes} is not planned: at most {MAX_PLANNED} (its expectation grows with"
            " the votes' square)"
        )
    waves, whole = price(first_wave, first_wave, "waves"), price(votes, votes, "one_request")
    best = waves
    for first in range(min(first_wave, votes), votes + 1):
        for least in range(1, votes + 1):
            if first == votes and least > 1:
                break  # one wave: the later wave's size never matters
            choice = price(first, least)
            if (
                choice.most_likely >= waves.most_likely - ACCURACY_SLACK
                and choice.expected_cost < best.expected_cost - 1e-15
            ):
                best = choice
    priced = dataclasses.replace(best, name="priced")
    return {"waves": waves, "one_request": whole, "priced": priced}
