"""When a vote has heard enough: Adaptive-Consistency's Beta rule, applied wave by wave.

Asking every vote of a fixed N pays for agreement that was clear after three. Adaptive-
Consistency (Aggarwal et al., 2023) stops sampling once a Beta posterior says the leading
answer is settled: with `a` votes for the leader and `b` for the runner-up, the leader's share
p of the two has posterior Beta(a + 1, b + 1), and the vote stops when P(p > 1/2) reaches
the threshold (0.95 there). They draw samples one at a time; here votes are asked in
parallel waves, so a settled vote costs one wave of latency, not one call per vote:

- the first wave asks `first_wave` votes at once (3 by default);
- after each wave, the vote stops when the leader is settled or `max_votes` have been asked;
- else the next wave asks the fewest further votes that could settle it if they all agreed
  with the leader, but at least `min_wave` (by default `first_wave`), never past `max_votes`; when even that many
  agreeing votes could not settle it, the next wave asks all the votes left (stopping there
  instead would leave hard questions to a plurality of few votes: it cost 0.9 pp of accuracy
  in bench/adaptive_vote.py's simulation for 10% fewer calls).

The threshold is 0.93 by default (Adaptive-Consistency uses 0.95 with one sample at a time):
at 0.95 three agreeing votes do not settle (P = 0.9375), so every easy question would pay a
second wave of latency; at 0.93 they do, and the share of settled votes whose answer is the
most likely one stays above 0.98 in the simulation.

For integer parameters the posterior is a binomial sum: P(p > 1/2) = sum_{j=0}^{a} C(n, j) / 2^n
with n = a + b + 1, so no special functions are needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

DEFAULT_THRESHOLD = 0.93
"""Three agreeing votes (P = 0.9375) settle; with a runner-up, the leader needs about twice its votes."""
DEFAULT_FIRST_WAVE = 3


def leader_posterior(leader: int, runner_up: int) -> float:
    """P(the leader's share of the two leading answers > 1/2 | the counts), uniform prior."""
    n = leader + runner_up + 1
    return sum(comb(n, j) for j in range(leader + 1)) / (1 << n)  # 2**n, as an int (int ** int is Any to mypy)


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


def decide(counts: list[int], asked: int, max_votes: int, *, threshold: float = DEFAULT_THRESHOLD,
           first_wave: int = DEFAULT_FIRST_WAVE, min_leader: int = 0, min_wave: int | None = None) -> Decision:
    """What to do after `asked` votes whose valid answers have `counts` (any order). `min_leader`: the votes
    an answer needs (`min_votes`), below which no posterior settles it. `min_wave`: the fewest votes a later wave
    asks (default `first_wave`; a vote's priced plan sets both: logic/vote_plan.py)."""
    return decide_units([counts], asked, max_votes, threshold=threshold, first_wave=first_wave, min_leader=min_leader,
                        min_wave=min_wave)


def decide_units(units: list[list[int]], asked: int, max_votes: int, *, threshold: float = DEFAULT_THRESHOLD,
                 first_wave: int = DEFAULT_FIRST_WAVE, min_leader: int = 0, min_wave: int | None = None) -> Decision:
    """`decide` for a vote that settles several units at once (the fields of a vote on an object,
    logic/field_vote.py): it has settled when every unit has, its posterior is the weakest unit's, and
    the next wave is what the least settled unit needs."""
    if asked == 0:
        return Decision(False, min(max_votes, max(first_wave, min_leader)), 0.0, "first wave")
    judged = [(settled(counts, threshold, min_leader), sorted(counts, reverse=True) + [0, 0]) for counts in units or [[]]]
    posterior = min(p for (_, p), _ in judged)
    if all(done for (done, _), _ in judged):
        return Decision(True, 0, posterior, f"settled: P(leader ahead) {posterior:.3f} >= {threshold}")
    remaining = max_votes - asked
    if remaining <= 0:
        return Decision(True, 0, posterior, "the most allowed")
    needed = max(next((k for k in range(1, remaining + 1)
                       if leader_posterior(ranked[0] + k, ranked[1]) >= threshold and ranked[0] + k >= min_leader),
                      remaining)
                 for (done, _), ranked in judged if not done)
    size = min(remaining, max(needed, first_wave if min_wave is None else min_wave))
    why = "cannot settle before the most votes: asking the rest" if size == remaining and needed == remaining else \
        f"not settled: P(leader ahead) {posterior:.3f} < {threshold}"
    return Decision(False, size, posterior, why)
