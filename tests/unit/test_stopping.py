"""The stopping rule of adaptive votes (logic/stopping.py)."""

from __future__ import annotations

import random

import pytest

from parallax.logic.stopping import decide, leader_posterior


def test_the_posterior_matches_a_monte_carlo_estimate_of_the_beta_rule():
    rng = random.Random(1)
    for leader, runner_up in ((3, 0), (4, 1), (2, 2), (5, 3)):
        draws = [rng.betavariate(leader + 1, runner_up + 1) > 0.5 for _ in range(40000)]
        assert abs(leader_posterior(leader, runner_up) - sum(draws) / len(draws)) < 0.01


@pytest.mark.parametrize(("counts", "asked", "stop", "next_wave"), [
    ([], 0, False, 3),            # the first wave
    ([4], 4, True, 0),            # unanimous 4: P = 0.969
    ([3], 3, False, 1),           # unanimous 3: P = 0.9375, one more agreeing vote would settle it
    ([2, 1], 3, False, 4),        # 2-1: four more agreeing votes (6-1, P = 0.965) are the fewest that settle
    ([2, 1], 6, True, 0),         # ...but only 2 remain of 8: it cannot settle, stop
    ([4, 4], 8, True, 0),         # the most votes
    ([], 3, False, 4),            # every vote of the first wave failed: ask the fewest that could settle
])
def test_waves_ask_only_what_could_still_settle_the_vote(counts, asked, stop, next_wave):
    decision = decide(counts, asked, 8)
    assert (decision.stop, decision.next_wave) == (stop, next_wave), decision.reason


def test_a_single_vote_asked_is_never_more_than_one():
    assert decide([], 0, 1).next_wave == 1 and decide([1], 1, 1).stop
