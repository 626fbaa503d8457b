"""A section run's first slice goes ahead, so its siblings find their shared prefix in the endpoint's cache.

Why: the slices of a section run share their system text, lessons, brief and question, and differ
only in their part, which comes last (prompts/templates.py). An endpoint caches a prefix once it has
read it (vLLM caches blocks once computed; OpenAI likewise): twenty slices sent at the same instant
all arrive before any prompt has been read, and none of them hits. So slice 0 is sent first and
the others wait until it has come back (its prompt has then surely been read), at the price of
one slice's latency in wall time (at most MAX_WAIT_S: a lead that hangs is not waited for).

Only slices in this process wait, and only for a lead that is running: the tasks of a fan-out
start in the same superstep and say which slices they carry before anything waits; a resumed run
whose slice 0 had finished before has no lead running, and nobody waits. A lead that fails or is
cancelled releases the others as well.
"""

from __future__ import annotations

import asyncio

LEAD = 0
"""The slice index that goes ahead."""
MIN_SLICES = 3
"""Fewer slices than this gain too little from a cached prefix to pay a slice's latency for it."""
MAX_WAIT_S = 10.0
"""The longest the others wait for a lead that hangs: past it they go, uncached, rather than late."""


class PrefixLead:
    """What the tasks of one section fan-out share: which slices run here, and whether the lead is back."""

    def __init__(self) -> None:
        self.running: set[int] = set()
        self.back = asyncio.Event()

    def carries(self, indices: list[int]) -> None:
        """A task of the fan-out runs these slices (called before its first await)."""
        self.running.update(indices)

    async def wait_turn(self, index: int, total: int) -> None:
        """Slice `index` of `total` waits for the lead, if one is running and it is not the lead itself."""
        if index == LEAD or total < MIN_SLICES:
            return
        await asyncio.sleep(0)  # the superstep's other tasks say what they carry
        if LEAD in self.running:
            try:
                await asyncio.wait_for(self.back.wait(), MAX_WAIT_S)
            except TimeoutError:
                self.back.set()  # the lead hangs: nobody waits for it any more

    def done(self, index: int) -> None:
        """Slice `index` has come back (answered, failed or cancelled)."""
        if index == LEAD:
            self.back.set()
