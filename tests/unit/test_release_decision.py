"""The gray release rule on its own: arms by thread, Wilson intervals, looks, promote and
rollback."""

from __future__ import annotations

import math
import random

import pytest

from parallax.logic.release_decision import (
    Rule,
    assigned_arm,
    check_rule,
    decide,
    run_success,
    served_version,
    wilson,
)


def test_a_thread_keeps_its_arm_and_the_share_is_respected():
    arms = [assigned_arm("playbook/fin", f"thread-{i}", 10) for i in range(20_000)]
    assert abs(arms.count("canary") / len(arms) - 0.10) < 0.01
    assert all(assigned_arm("playbook/fin", f"thread-{i}", 10) == arms[i] for i in range(200))
    # another subject splits the same threads independently
    other = [assigned_arm("prompt/answer", f"thread-{i}", 10) for i in range(20_000)]
    both = sum(a == b == "canary" for a, b in zip(arms, other, strict=True)) / len(arms)
    assert abs(both - 0.01) < 0.005


def test_wilson_interval_matches_the_formula_by_hand():
    low, high = wilson(8, 10)
    # p=0.8, n=10, z=1.96: centre (0.8+0.19208)/1.38416, half 1.96*sqrt(0.016+0.009604)/1.38416
    assert low == pytest.approx((0.99208 - 1.96 * math.sqrt(0.025604)) / 1.384146, abs=1e-4)
    assert high == pytest.approx((0.99208 + 1.96 * math.sqrt(0.025604)) / 1.384146, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(0, 50)[0] == 0.0 and wilson(50, 50)[1] == pytest.approx(1.0)


def test_looks_double_from_the_minimum_and_split_the_error_rate():
    rule = Rule(error_rate=0.05, margin=0.05, min_runs=50, max_runs=1600)
    assert rule.looks() == [50, 100, 200, 400, 800, 1600]
    assert rule.z() == pytest.approx(2.394, abs=1e-3)  # normal quantile of 1 - 0.05/6


def arms(canary: tuple[int, int], production: tuple[int, int]) -> dict:
    return {
        "canary": {"runs": canary[0], "successes": canary[1]},
        "production": {"runs": production[0], "successes": production[1]},
    }


def test_rule_waits_for_the_next_look_then_decides():
    rule = Rule(min_runs=50, max_runs=200)
    assert decide(arms((49, 10), (400, 300)), rule, 0) == (None, 0, {})
    verdict, nxt, figures = decide(arms((50, 10), (450, 340)), rule, 0)  # 20% vs 76%
    assert verdict == "rollback" and nxt == 1 and figures["runs_per_arm"] == 50
    verdict, _, _ = decide(arms((100, 76), (900, 680)), rule, 1)  # equal rates, big enough sample
    assert verdict is None  # not yet shown non-inferior at 100 per arm
    verdict, _, figures = decide(arms((200, 156), (1800, 1360)), rule, 2)  # 78% vs 75.6%, last look
    assert verdict == "promote" and figures["look"] == 3 and figures["looks"] == 3


def test_no_decision_by_the_last_look_is_left_to_a_person():
    verdict, _, _ = decide(arms((50, 35), (50, 37)), Rule(min_runs=50, max_runs=50), 0)
    assert verdict == "undecided"


def test_equal_versions_are_rarely_rolled_back_and_much_worse_ones_are():
    rule, rng = Rule(min_runs=50, max_runs=800), random.Random(7)

    def rollout(p_prod: float, p_canary: float) -> str | None:
        a, look = arms((0, 0), (0, 0)), 0
        while True:
            arm = "canary" if rng.random() < 0.5 else "production"
            a[arm]["runs"] += 1
            a[arm]["successes"] += rng.random() < (p_canary if arm == "canary" else p_prod)
            verdict, look, _ = decide(a, rule, look)
            if verdict:
                return verdict

    equal = [rollout(0.7, 0.7) for _ in range(100)]
    worse = [rollout(0.7, 0.55) for _ in range(100)]
    assert equal.count("rollback") <= 8  # stated 5%; 100 rollouts
    assert worse.count("rollback") >= 95


def test_success_counts_feedback_first_then_status_and_target():
    assert run_success("ok", None, None) is True
    assert run_success("ok", False, None) is False
    assert run_success("needs_review", None, None) is False
    assert run_success("needs_review", None, 1.0) is True
    assert run_success("ok", True, 0.0) is False


def test_served_version_follows_labels():
    assert served_version({}, 3, "playbook/x", "t") == {
        "version": 3,
        "arm": "head",
        "release_id": None,
    }
    assert served_version({"production": 2}, 3, "playbook/x", "t")["version"] == 2
    labels = {"production": 2, "release": {"id": "r1", "version": 3, "share": 50}}
    got = {served_version(labels, 3, "playbook/x", f"t{i}")["version"] for i in range(50)}
    assert got == {2, 3}
    assert served_version(labels, 3, "playbook/x", "t1", allow_canary=False)["version"] == 2


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="error rate"):
        check_rule(0.6, 0.05, 50, 100)
    with pytest.raises(ValueError, match="min runs"):
        check_rule(0.05, 0.05, 100, 50)
