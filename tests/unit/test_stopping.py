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


@pytest.mark.parametrize(
    ("counts", "asked", "threshold", "stop", "next_wave"),
    [
        ([], 0, 0.93, False, 3),  # the first wave
        ([3], 3, 0.93, True, 0),  # three agreeing votes: P = 0.9375 settles at 0.93
        ([3], 3, 0.95, False, 3),  # ...not at 0.95: one more would do, but a wave asks at least 3
        ([2, 1], 3, 0.93, False, 3),  # 2-1: three more agreeing votes (5-1, P = 0.9375) settle it
        (
            [3, 2],
            5,
            0.93,
            False,
            3,
        ),  # 3-2: no 3 more can settle it (6-2, P = 0.91): ask all that are left
        (
            [2, 1],
            3,
            0.99,
            False,
            5,
        ),  # a strict threshold: even 5 more cannot settle it, ask the rest
        ([4, 4], 8, 0.93, True, 0),  # the most votes
        (
            [],
            3,
            0.93,
            False,
            3,
        ),  # every vote of the first wave failed: ask the fewest that could settle
    ],
)
def test_waves_ask_what_could_still_settle_the_vote(counts, asked, threshold, stop, next_wave):
    decision = decide(counts, asked, 8, threshold=threshold)
    assert (decision.stop, decision.next_wave) == (stop, next_wave), decision.reason


def test_min_votes_keeps_a_vote_going_until_an_answer_has_them():
    assert decide([3], 3, 8, min_leader=5).next_wave == 3
    assert decide([5], 6, 8, min_leader=5).stop


def test_a_single_vote_asked_is_never_more_than_one():
    assert decide([], 0, 1).next_wave == 1 and decide([1], 1, 1).stop


def test_a_vote_on_an_object_waits_for_its_least_settled_field():
    from parallax.logic.stopping import decide_units

    both = decide_units([[3], [3]], 3, 8)
    assert both.stop and both.reason.startswith("settled")
    split = decide_units(
        [[3], [2, 1]], 3, 8
    )  # revenue settled, currency 2-1: 5-1 settles it, 3 more
    assert (split.stop, split.next_wave) == (False, 3)
    assert split.posterior == decide_units([[2, 1]], 3, 8).posterior
    nothing = decide_units([], 3, 8)  # no field given by any vote: nothing has settled
    assert not nothing.stop
