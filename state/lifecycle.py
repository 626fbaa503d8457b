"""The lifecycle of one branch, kept as timed transitions in its trace record.

See docs/internals/runs.md#branch-lifecycles.
"""

from __future__ import annotations

import time
from typing import Literal

from typing_extensions import TypedDict

BranchState = Literal[
    "PENDING",
    "DISPATCHED",
    "IN_PROGRESS",
    "COMPLETED",
    "TIMEOUT",
    "FAILED",
    "RETRY",
    "ESCALATED",
    "CANCELLED",
]
TERMINAL: frozenset[BranchState] = frozenset({"COMPLETED", "ESCALATED", "CANCELLED"})
ALLOWED: dict[BranchState | None, frozenset[BranchState]] = {
    None: frozenset({"PENDING"}),
    "PENDING": frozenset({"DISPATCHED", "FAILED", "CANCELLED"}),
    "DISPATCHED": frozenset({"IN_PROGRESS", "FAILED", "CANCELLED"}),
    "IN_PROGRESS": frozenset({"COMPLETED", "TIMEOUT", "FAILED", "CANCELLED"}),
    "TIMEOUT": frozenset({"RETRY", "ESCALATED", "CANCELLED"}),
    "FAILED": frozenset({"RETRY", "ESCALATED", "CANCELLED"}),
    "RETRY": frozenset({"IN_PROGRESS", "FAILED", "CANCELLED"}),
}


class Transition(TypedDict):
    """One step, kept as a plain dict: a wide fan-out records thousands of them."""

    state: BranchState
    at: float
    """Unix time in seconds (millisecond precision)."""
    reason: str


class IllegalTransition(RuntimeError):
    """A bug: code moved a branch along an edge the lifecycle does not have."""


class Lifecycle:
    """The transitions of one branch (or one backup copy), checked as they are made."""

    def __init__(self, transitions: list[Transition] | None = None) -> None:
        self.transitions: list[Transition] = list(transitions or [])

    @property
    def state(self) -> BranchState | None:
        return self.transitions[-1]["state"] if self.transitions else None

    def move(self, state: BranchState, reason: str = "") -> None:
        if state not in ALLOWED.get(self.state, frozenset()):
            raise IllegalTransition(f"branch cannot go from {self.state} to {state} ({reason})")
        self.transitions.append(
            {"state": state, "at": round(time.time(), 3), "reason": reason[:300]}
        )

    def finish(self, state: BranchState, reason: str = "", failure: str | None = None) -> None:
        """Move to a terminal state through whatever the lifecycle requires on the way: ESCALATED
        from a state that did not just fail first records a FAILED step (`failure`, else `reason`).
        """
        if self.state in TERMINAL:
            return
        if state == "ESCALATED" and self.state not in ("TIMEOUT", "FAILED"):
            self.move("FAILED", reason if failure is None else failure)
        self.move(state, reason)
