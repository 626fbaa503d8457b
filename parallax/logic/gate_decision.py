"""When a gate may accept a candidate by itself: only on a gain larger than the validation noise.

See docs/internals/learning.md#the-gates-rule.
"""

from __future__ import annotations

import math
from typing import Literal

Z = 1.96

Verdict = Literal["accept", "reject", "ask"]


def noise(before: float, after: float, n: int, changed: tuple[int, int] | None = None) -> float:
    """Half-width of the 95% band of after - before on `n` tasks; `changed` = (fixed, broken) task
    counts."""
    if n <= 0:
        return 1.0
    if changed is not None:
        return Z * math.sqrt(sum(changed)) / n
    p = (before + after) / 2
    return Z * math.sqrt(2 * p * (1 - p) / n)


def paired_changes(before: dict[str, bool], after: dict[str, bool]) -> tuple[int, int] | None:
    """(tasks the candidate fixed, tasks it broke) over the tasks both were scored on; None without
    overlap."""
    common = set(before) & set(after)
    if not common:
        return None
    return sum(after[t] and not before[t] for t in common), sum(
        before[t] and not after[t] for t in common
    )


def gate_verdict(
    before: float, after: float, n: int, margin: float, changed: tuple[int, int] | None = None
) -> tuple[Verdict, str, float]:
    """(verdict, reason, noise) for validation accuracy `before` -> `after` on `n` tasks."""
    band = round(noise(before, after, n, changed), 4)
    if after < before - margin:
        return "reject", f"validation accuracy fell from {before} to {after}", band
    if before == 0 and after == 0:
        return "ask", "a tie without signal: validation accuracy was 0.0 before and after", band
    if after - before <= band:
        how = (
            f"{changed[0]} tasks fixed, {changed[1]} broken" if changed is not None else "unpaired"
        )
        return (
            "ask",
            (
                f"a tie without signal: validation accuracy {before} -> {after} is inside the noise"
                f" of {n} tasks (±{band}; {how})"
            ),
            band,
        )
    return "accept", "", band


def unmeasured(why: str) -> tuple[Verdict, str]:
    """The verdict when the gate has nothing to measure (no validation tasks, or runs that do not
    use what changed): the candidate goes through, and the reason (and the caller's `evaluated:
    False`) says so. Accepted is not served: a prompt edit reaches runs only through a release, and
    a playbook version can be pinned out of runs the same way (`playbook release`)."""
    return "accept", f"{why}: accepted without evaluation"


def settle(verdict: Verdict, reason: str, person: bool) -> tuple[Verdict, str]:
    """The one gate rule of playbook updates and prompt edits: a rejection stands, a real gain
    stands, and a candidate without signal ("ask") is rejected unless a person is there to say yes
    (`person`: `--approve`). With a person, "ask" stays "ask" and the caller puts the question (or
    takes the yes already given).
    """
    if verdict == "ask" and not person:
        return "reject", f"{reason}: a person must approve it (--approve)"
    return verdict, reason


def approved(reason: str) -> str:
    """The reason recorded when a person accepted a candidate the gate could not accept by
    itself."""
    return f"approved by a person: {reason}"
