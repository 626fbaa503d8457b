"""A section run's first slice goes ahead, so its siblings find their shared prefix in the cache.

See docs/internals/model-calls.md#a-section-runs-lead-slice.
"""

from __future__ import annotations

import asyncio

LEAD = 0
"""The slice index that goes ahead."""
MIN_SLICES = 3
"""Fewer slices than this gain too little from a cached prefix to pay a slice's latency for it."""
MAX_WAIT_S = 10.0
"""The longest the others wait for a lead that hangs: past it they go, uncached, rather than late.
"""


class PrefixLead:
    """What the tasks of one section fan-out share: which slices run here, and whether the lead is
    back."""

    def __init__(self) -> None:
        self.running: set[int] = set()
        self.back = asyncio.Event()

    def carries(self, indices: list[int]) -> None:
        """A task of the fan-out runs these slices (called before its first await)."""
        self.running.update(indices)

    async def wait_turn(self, index: int, total: int) -> None:
        """Slice `index` of `total` waits for the lead, if one is running and it is not the lead
        itself."""
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
