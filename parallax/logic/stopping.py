"""When a vote has heard enough: Adaptive-Consistency's Beta rule, applied wave by wave.

See docs/internals/votes.md#adaptive-stopping.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

DEFAULT_THRESHOLD = 0.93
"""Three agreeing votes (P = 0.9375) settle; with a runner-up, the leader needs about twice its
votes."""
DEFAULT_FIRST_WAVE = 3


def leader_posterior(leader: int, runner_up: int) -> float:
    """P(the leader's share of the two leading answers > 1/2 | the counts), uniform prior."""
    n = leader + runner_up + 1
    return sum(comb(n, j) for j in range(leader + 1)) / (
        1 << n
    )  # 2**n, as an int (int ** int is Any to mypy)


@dataclass(frozen=True)
class Decision:
    stop: bool
    next_wave: int
    """Votes to ask next (0 when stopping)."""
    posterior: float
    reason: str


def settled(counts: list[int], threshold: float, min_leader: int = 0) -> tuple[bool, float]:
    """Whether votes with `counts` have settled their leader, and the posterior that says so."""
    ranked = sorted(counts, reverse=True) + [0, 0]
    posterior = leader_posterior(ranked[0], ranked[1]) if ranked[0] else 0.0
    return ranked[0] >= max(1, min_leader) and posterior >= threshold, posterior


def decide(
    counts: list[int],
    asked: int,
    max_votes: int,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    first_wave: int = DEFAULT_FIRST_WAVE,
    min_leader: int = 0,
    min_wave: int | None = None,
) -> Decision:
    """What to do after `asked` votes whose valid answers have `counts` (any order). `min_leader`:
    the votes an answer needs (`min_votes`), below which no posterior settles it. `min_wave`: the
    fewest votes a later wave asks (default `first_wave`; a vote's priced plan sets both:
    logic/vote_plan.py)."""
    return decide_units(
        [counts],
        asked,
        max_votes,
        threshold=threshold,
        first_wave=first_wave,
        min_leader=min_leader,
        min_wave=min_wave,
    )


def decide_units(
    units: list[list[int]],
    asked: int,
    max_votes: int,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    first_wave: int = DEFAULT_FIRST_WAVE,
    min_leader: int = 0,
    min_wave: int | None = None,
) -> Decision:
    """`decide` for a vote that settles several units at once (the fields of a vote on an object,
    logic/field_vote.py): it has settled when every unit has, its posterior is the weakest unit's,
    and the next wave is what the least settled unit needs."""
    if asked == 0:
        return Decision(False, min(max_votes, max(first_wave, min_leader)), 0.0, "first wave")
    judged = [
        (settled(counts, threshold, min_leader), sorted(counts, reverse=True) + [0, 0])
        for counts in units or [[]]
    ]
    posterior = min(p for (_, p), _ in judged)
    if all(done for (done, _), _ in judged):
        return Decision(
            True, 0, posterior, f"settled: P(leader ahead) {posterior:.3f} >= {threshold}"
        )
    remaining = max_votes - asked
    if remaining <= 0:
        return Decision(True, 0, posterior, "the most allowed")
    needed = max(
        next(
            (
                k
                for k in range(1, remaining + 1)
                if leader_posterior(ranked[0] + k, ranked[1]) >= threshold
                and ranked[0] + k >= min_leader
            ),
            remaining,
        )
        for (done, _), ranked in judged
        if not done
    )
    size = min(remaining, max(needed, first_wave if min_wave is None else min_wave))
    why = (
        "cannot settle before the most votes: asking the rest"
        if size == remaining and needed == remaining
        else f"not settled: P(leader ahead) {posterior:.3f} < {threshold}"
    )
    return Decision(False, size, posterior, why)
