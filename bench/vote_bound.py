"""The fewest votes any stopping rule can ask at a given accuracy, when the mix is known exactly.

Why: bench/adaptive_vote.py reads its calls ratio against fixed-8's, but a ratio alone does not say
whether a better rule exists. This computes the frontier no rule can beat on a stated mix: the
Bayes-optimal sequential policy that knows the mix (each kind's share and answer distribution)
and asks one vote at a time, for every price `lam` of a wrong answer in votes (minimise
E[votes] + lam * P(wrong)). A real rule knows less (not the mix) and asks in parallel waves (one
wave of latency instead of one per vote), so it can only do worse; a goal below this frontier
cannot be met by any rule.

What the policy sees is what a vote sees: how many votes each distinct answer has, not which
answer is right. Votes are exchangeable, so the sorted counts are the whole state (at most three
distinct answers here, one per label of the mix). Its final answer is the one most likely right
given the counts, which is at least as accurate as the plurality a real vote takes.
"""

from __future__ import annotations

import itertools
from functools import cache
from math import factorial, prod

Kind = tuple[float, dict[str, float]]
"""A kind of question: its share of the mix, and the probability of each answer label ("right",
...)."""


class Mix:
    def __init__(self, kinds: list[Kind]) -> None:
        self.kinds = kinds
        self.labels = sorted(
            {label for _, dist in kinds for label in dist}, key=lambda x: x != "right"
        )
        assert self.labels[0] == "right", "a mix needs a 'right' answer"

    def weight(self, counts: tuple[int, ...]) -> float:
        """P(one particular vote sequence with these per-label counts), over the mix."""
        return sum(
            share
            * prod(dist.get(label, 0.0) ** n for label, n in zip(self.labels, counts, strict=True))
            for share, dist in self.kinds
        )

    @cache  # noqa: B019 (a Mix lives as long as the benchmark)
    def labelled(self, seen: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The per-label count vectors a vote could have when its sorted answer counts are
        `seen`."""
        n = sum(seen)
        return [
            c
            for c in itertools.product(range(n + 1), repeat=len(self.labels))
            if sum(c) == n and tuple(sorted((x for x in c if x), reverse=True)) == seen
        ]

    @cache  # noqa: B019
    def right_if_stopped(self, seen: tuple[int, ...]) -> float:
        """P(right) of the best pick (an answer with some count, chosen among its equals) given
        `seen`."""
        vectors = self.labelled(seen)
        total = sum(self.weight(c) for c in vectors)
        return (
            max(
                sum(self.weight(c) for c in vectors if c[0] == v) / seen.count(v) for v in set(seen)
            )
            / total
        )

    def next_counts(self, seen: tuple[int, ...]) -> dict[tuple[int, ...], float]:
        """P(the sorted counts after one more vote | `seen`)."""
        vectors = self.labelled(seen)
        total = sum(self.weight(c) for c in vectors)
        out: dict[tuple[int, ...], float] = {}
        for c in vectors:
            for j in range(len(c)):
                after = tuple(x + (i == j) for i, x in enumerate(c))
                key = tuple(sorted((x for x in after if x), reverse=True))
                out[key] = out.get(key, 0.0) + self.weight(after) / total
        return out


def optimal(mix: Mix, lam: float, max_votes: int) -> tuple[float, float]:
    """(expected votes, accuracy) of the Bayes-optimal policy at price `lam` per wrong answer."""

    @cache
    def stops(seen: tuple[int, ...]) -> tuple[float, bool]:
        stop = lam * (1 - mix.right_if_stopped(seen))
        if sum(seen) >= max_votes:
            return stop, True
        go = 1 + sum(p * stops(after)[0] for after, p in mix.next_counts(seen).items())
        return min(stop, go), stop <= go

    votes = accuracy = 0.0
    frontier = {(1,): 1.0}  # the first vote is always asked
    while frontier:
        later: dict[tuple[int, ...], float] = {}
        for seen, p in frontier.items():
            if stops(seen)[1]:
                votes += p * sum(seen)
                accuracy += p * mix.right_if_stopped(seen)
            else:
                for after, q in mix.next_counts(seen).items():
                    later[after] = later.get(after, 0.0) + p * q
        frontier = later
    return votes, accuracy


def plurality_accuracy(mix: Mix, votes: int) -> float:
    """Expected accuracy of a fixed vote of `votes` that answers with the plurality (ties split
    evenly)."""
    accuracy = 0.0
    for share, dist in mix.kinds:
        for c in itertools.product(range(votes + 1), repeat=len(mix.labels)):
            if sum(c) != votes:
                continue
            p = (
                factorial(votes)
                / prod(factorial(x) for x in c)
                * prod(dist.get(label, 0.0) ** n for label, n in zip(mix.labels, c, strict=True))
            )
            accuracy += share * p * (c[0] == max(c)) / c.count(max(c))
    return accuracy


def fewest_votes(mix: Mix, max_votes: int, within_pp: float) -> dict[str, float]:
    """The lowest expected votes at accuracy within `within_pp` points of a fixed plurality of
    `max_votes`.

    The optimal policies over prices of a wrong answer from 1 to 10,000 votes trace the frontier; a
    rule may also toss a coin between two of them per question, so the bound is read on the line
    between the two frontier points around the target accuracy (the frontier's lower convex hull).
    """
    fixed = plurality_accuracy(mix, max_votes)
    target = fixed - within_pp / 100 - 1e-9  # sums in another order differ in the last bits
    points = sorted(
        {optimal(mix, 1.25**k, max_votes) for k in range(42)} | {(float(max_votes), fixed)},
        key=lambda p: p[1],
    )
    best = float(max_votes)
    for (v1, a1), (v2, a2) in itertools.combinations(points, 2):
        if a1 <= target <= a2 and a2 > a1:
            best = min(best, v1 + (v2 - v1) * (target - a1) / (a2 - a1))
        if a1 >= target:
            best = min(best, v1)
        if a2 >= target:
            best = min(best, v2)
    return {
        "calls_ratio_vs_fixed": round(best / max_votes, 3),
        "accuracy_delta_pp": -within_pp,
        "fixed_plurality_accuracy": round(fixed, 4),
    }
