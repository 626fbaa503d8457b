"""Gray release: which version a run gets, and when a canary is promoted or rolled back.

See docs/internals/learning.md#gray-release.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, cast

from parallax.state.records import ServedVersion
from parallax.state.release_record import (
    ArmCounts,
    LabelsRecord,
    LookFigures,
    ReleaseArms,
    RuleData,
)

Arm = Literal["production", "canary"]
Verdict = Literal["promote", "rollback", "undecided"]
WILSON_Z = 1.959964  # 95% intervals for display


@dataclass(frozen=True)
class Rule:
    """The decision rule of one release (stored with it, so a release keeps the rule it started
    with)."""

    error_rate: float = 0.05
    margin: float = 0.05
    min_runs: int = 50
    max_runs: int = 1600

    def looks(self) -> list[int]:
        """Sizes of the smaller arm at which the rule looks: min_runs, doubling, up to max_runs."""
        sizes, n = [], self.min_runs
        while n < self.max_runs:
            sizes.append(n)
            n *= 2
        return sizes + [self.max_runs]

    def z(self) -> float:
        return NormalDist().inv_cdf(1 - self.error_rate / len(self.looks()))

    def as_dict(self) -> RuleData:
        return {
            "error_rate": self.error_rate,
            "margin": self.margin,
            "min_runs": self.min_runs,
            "max_runs": self.max_runs,
        }


def check_rule(error_rate: float, margin: float, min_runs: int, max_runs: int) -> Rule:
    """The rule, or ValueError with what to change."""
    if not 0 < error_rate < 0.5:
        raise ValueError(f"error rate must be between 0 and 0.5, got {error_rate}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be between 0 and 1, got {margin}")
    if min_runs < 1 or max_runs < min_runs:
        raise ValueError(f"need 1 <= min runs <= max runs, got {min_runs} and {max_runs}")
    return Rule(error_rate, margin, min_runs, max_runs)


def check_share(share: float) -> float:
    if not 0 < share < 100:
        raise ValueError(
            f"canary share must be more than 0 and less than 100 percent, got {share:g}"
        )
    return share


def assigned_arm(subject: str, thread_key: str, share: float) -> Arm:
    """`canary` for `share` percent of thread keys, the same answer every time for the same
    thread."""
    digest = hashlib.sha256(f"{subject}\n{thread_key}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") % 10_000
    return "canary" if bucket < round(share * 100) else "production"


def served_version(
    labels: LabelsRecord,
    head_version: int,
    subject: str,
    thread_key: str,
    allow_canary: bool = True,
) -> ServedVersion:
    """What a run on `thread_key` gets from a labels record (runtime/storage/labels.py):
    {"version", "arm" (production | canary | head), "release_id"}. Without labels: the head."""
    release = labels.get("release") if allow_canary else None
    production = labels.get("production")
    if release:
        arm = assigned_arm(subject, thread_key, release["share"])
        # a running canary has a production version: start_release pins one
        version = release["version"] if arm == "canary" else cast(int, production)
        return {"version": version, "arm": arm, "release_id": release["id"]}
    if production is not None:
        return {"version": production, "arm": "production", "release_id": None}
    return {"version": head_version, "arm": "head", "release_id": None}


def run_success(status: str | None, correct: bool | None, feedback: float | None) -> bool:
    """One trial: a person's feedback decides when there is some (>= 0.5 is good); otherwise the
    run must have ended `ok` and, where its answer was scored against a target, been right."""
    if feedback is not None:
        return feedback >= 0.5
    return status == "ok" and correct is not False


def wilson(successes: int, runs: int, z: float = WILSON_Z) -> tuple[float, float]:
    """Wilson score interval of a success rate (95% by default); (0, 1) without runs."""
    if runs <= 0:
        return 0.0, 1.0
    p = successes / runs
    denominator = 1 + z * z / runs
    centre = (p + z * z / (2 * runs)) / denominator
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def difference(canary: ArmCounts, production: ArmCounts) -> tuple[float, float]:
    """(canary rate - production rate, its Agresti-Caffo standard error)."""

    def adjusted(arm: ArmCounts) -> tuple[float, int]:
        n = arm["runs"] + 2
        return (arm["successes"] + 1) / n, n

    pc, nc = adjusted(canary)
    pp, np_ = adjusted(production)
    return pc - pp, math.sqrt(pc * (1 - pc) / nc + pp * (1 - pp) / np_)


def decide(
    arms: ReleaseArms, rule: Rule, next_look: int
) -> tuple[Verdict | None, int, LookFigures]:
    """(verdict or None while collecting, the next look index, the figures of the look).

    Called after every counted run; it acts only when the smaller arm reaches the next look."""
    looks = rule.looks()
    smaller = min(arms["canary"]["runs"], arms["production"]["runs"])
    if next_look >= len(looks) or smaller < looks[next_look]:
        return None, next_look, {}
    d, se = difference(arms["canary"], arms["production"])
    z = rule.z()
    figures: LookFigures = {
        "look": next_look + 1,
        "looks": len(looks),
        "runs_per_arm": smaller,
        "difference": round(d, 4),
        "standard_error": round(se, 4),
        "z_needed": round(z, 3),
        "z_worse": round(d / se, 3),
        "z_not_worse": round((d + rule.margin) / se, 3),
    }
    if d / se < -z:
        return "rollback", next_look + 1, figures
    if (d + rule.margin) / se > z:
        return "promote", next_look + 1, figures
    if next_look + 1 >= len(looks):
        return "undecided", next_look + 1, figures
    return None, next_look + 1, figures


def explain(verdict: Verdict, figures: LookFigures, rule: Rule) -> str:
    """The reason recorded with an automatic decision."""
    d, look = (
        figures["difference"],
        f"look {figures['look']}/{figures['looks']} at {figures['runs_per_arm']} runs per arm",
    )
    if verdict == "rollback":
        return (
            f"canary worse: success rate {d:+.3f} vs production (z {figures['z_worse']} <"
            f" -{figures['z_needed']}, error rate {rule.error_rate:g}), {look}"
        )
    if verdict == "promote":
        return (
            f"canary not worse by more than {rule.margin:g}: difference {d:+.3f} (z"
            f" {figures['z_not_worse']} > {figures['z_needed']}, error rate {rule.error_rate:g}),"
            f" {look}"
        )
    return f"no decision after the last look ({look}, difference {d:+.3f}): a person decides"
