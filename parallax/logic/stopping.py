"""When a vote has heard enough: Adaptive-Consistency's Beta rule, applied wave by wave.

Asking every vote of a fixed N pays for agreement that was clear after three. Adaptive-
Consistency (Aggarwal et al., 2023) stops sampling once a Beta posterior says the leading
answer is settled: with `a` votes for the leader and `b` for the runner-up, the leader's share
p of the two has posterior Beta(a + 1, b + 1), and the vote stops when P(p > 1/2) reaches
the threshold (0.95 there). They draw samples one at a time; here votes are asked in
parallel waves, so a settled vote costs one wave of latency, not one call per vote:

- the first wave asks `first_wave` votes at once (3 by default);
- after each wave, the vote stops when the leader is settled, when `max_votes` have been
  asked, or when even unanimous remaining votes could not settle it;
- else the next wave asks the fewest further votes that could settle it if they all agreed
  with the leader, never past `max_votes`.

For integer parameters the posterior is a binomial sum: P(p > 1/2) = sum_{j=0}^{a} C(n, j) / 2^n
with n = a + b + 1, so no special functions are needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

DEFAULT_THRESHOLD = 0.95
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


def decide(counts: list[int], asked: int, max_votes: int, *, threshold: float = DEFAULT_THRESHOLD,
           first_wave: int = DEFAULT_FIRST_WAVE) -> Decision:
    """What to do after `asked` votes whose valid answers have `counts` (any order)."""
    ranked = sorted(counts, reverse=True) + [0, 0]
    leader, runner_up = ranked[0], ranked[1]
    posterior = leader_posterior(leader, runner_up) if leader else 0.0
    if asked == 0:
        return Decision(False, min(max_votes, first_wave), 0.0, "first wave")
    if leader and posterior >= threshold:
        return Decision(True, 0, posterior, f"settled: P(leader ahead) {posterior:.3f} >= {threshold}")
    remaining = max_votes - asked
    if remaining <= 0:
        return Decision(True, 0, posterior, f"asked the most votes ({max_votes})")
    needed = next((k for k in range(1, remaining + 1) if leader_posterior(leader + k, runner_up) >= threshold), None)
    if needed is None:
        return Decision(True, 0, posterior, f"cannot settle: even {remaining} more agreeing votes would not reach "
                                            f"{threshold}")
    return Decision(False, needed, posterior, f"not settled: P(leader ahead) {posterior:.3f} < {threshold}")
