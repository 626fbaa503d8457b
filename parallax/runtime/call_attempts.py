"""A branch's attempts and re-asks, each a step of its lifecycle (state/lifecycle.py)."""

from __future__ import annotations

from parallax.runtime.call_errors import describe
from parallax.runtime.failure_cause import ParseFailure
from parallax.runtime.retry import is_timeout
from parallax.state.lifecycle import Lifecycle


class Attempts:
    """Counts a call's attempts and re-asks and moves its lifecycle: IN_PROGRESS as an attempt
    starts, TIMEOUT or FAILED as one fails (the retry records RETRY), FAILED then RETRY for a
    reply that is re-asked."""

    def __init__(self, life: Lifecycle) -> None:
        self.life = life
        self.attempts = self.reasks = 0

    def start(self) -> None:
        self.attempts += 1
        again = f"attempt {self.attempts}" + (f", re-ask {self.reasks}" if self.reasks else "")
        self.life.move("IN_PROGRESS", again if self.attempts > 1 else "")

    def failed(self, exc: BaseException) -> None:
        self.life.move("TIMEOUT" if is_timeout(exc) else "FAILED", describe(exc))

    def reask(self, invalid: ParseFailure, max_reasks: int) -> bool:
        """Record an invalid reply; whether a re-ask is left (then it is counted and recorded)."""
        self.life.move("FAILED", f"invalid reply: {invalid}")
        if self.reasks >= max_reasks:
            return False
        self.life.move("RETRY", "re-ask for a valid reply")
        self.reasks += 1
        return True
