"""Speculation's race: the first candidate that passes its check wins, the others are cancelled.

One watch is shared by every `candidate` task of the superstep (runtime/fan_out_limit.py).
"""

from __future__ import annotations

import asyncio
from typing import Any


class CandidateWatch:
    def __init__(self) -> None:
        self.running: dict[str, asyncio.Task[Any]] = {}
        self.cancelled: set[str] = set()
        self.winner: str | None = None

    @property
    def reason(self) -> str:
        return f"cancelled: {self.winner} passed its check first" if self.winner else ""

    def started(self, candidate_id: str, task: asyncio.Task[Any]) -> None:
        """A candidate is under way; one that starts after a winner is known is cancelled at
        once."""
        self.running[candidate_id] = task
        if self.winner is not None:
            self._cancel(candidate_id)

    def finished(self, candidate_id: str, passed: bool) -> bool:
        """A candidate's check ended; True when it is the winner (it passed, first), which cancels
        the rest."""
        self.running.pop(candidate_id, None)
        if not passed or self.winner is not None:
            return False
        self.winner = candidate_id
        for other in list(self.running):
            self._cancel(other)
        return True

    def _cancel(self, candidate_id: str) -> None:
        task = self.running.pop(candidate_id, None)
        if task is not None and not task.done():
            self.cancelled.add(candidate_id)
            task.cancel()
