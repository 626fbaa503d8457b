"""A wave's votes still in flight cancelled once the vote has settled without them.

See docs/internals/votes.md#cancelling-votes-a-settled-vote-does-not-need.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from parallax.logic.stopping import settled


class VoteWatch:
    def __init__(self, earlier: list[str], threshold: float, min_leader: int = 0) -> None:
        self.counts = Counter(earlier)
        self.threshold, self.min_leader = threshold, min_leader
        self.running: dict[str, asyncio.Task[Any]] = {}
        self.cancelled: set[str] = set()
        self.reason = ""

    @property
    def settled(self) -> bool:
        return bool(self.reason)

    def started(self, branch_id: str, task: asyncio.Task[Any]) -> None:
        """A vote of this wave is under way; one that starts after the vote settled is cancelled at
        once."""
        self.running[branch_id] = task
        if self.settled:
            self._cancel(branch_id)

    def arrived(self, branch_ids: list[str]) -> None:
        """These votes' replies came back together (the choices of one request with `n`): none of
        them is in flight any more, so none is cancelled while its siblings are counted."""
        for branch_id in branch_ids:
            self.running.pop(branch_id, None)

    def finished(self, branch_id: str, value: str | None) -> None:
        """A vote came back with final value `value` (None: it failed); cancel the rest if that
        settles it."""
        self.running.pop(branch_id, None)
        if value is None or self.settled:
            return
        self.counts[value] += 1
        done, posterior = settled(list(self.counts.values()), self.threshold, self.min_leader)
        if done:
            self.reason = f"settled in flight: P(leader ahead) {posterior:.3f} >= {self.threshold}"
            for other in list(self.running):
                self._cancel(other)

    def _cancel(self, branch_id: str) -> None:
        task = self.running.pop(branch_id, None)
        if task is not None and not task.done():
            self.cancelled.add(branch_id)
            task.cancel()
