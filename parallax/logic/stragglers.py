"""Backup copies for stragglers: one slow branch must not hold up a hundred finished ones.

When a branch has run `factor` times longer than the median of its finished siblings
(and at least `min_s`), a backup copy of the same branch starts. The first copy to
finish with a usable reply wins and the other is cancelled. Both copies belong to one
branch id and only the winner's record is returned, so a vote is never counted twice.
The watch is shared by every task of a fan-out (runtime/superstep.py), so "siblings"
means all branches of the run's superstep, not just one task's group. A branch with too
few finished siblings (a direct run has none) is measured against the recent branches of
the same model in this process instead, once there are enough of them.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from parallax.runtime.services import RECENT
from parallax.state.lifecycle import Lifecycle

RunCopy = Callable[[Lifecycle], Coroutine[Any, Any, dict[str, Any]]]
MIN_RECENT = 20
"""Fewest recent durations that make a baseline."""


class StragglerWatch:
    """Durations of the finished branches of one fan-out, and the straggler threshold they imply."""

    def __init__(self, factor: float, min_s: float, min_finished: int = 2, recent: deque[float] | None = None) -> None:
        """`recent`: the model's recent branch durations, which this watch reads and adds to (the process
        services keep them per model: runtime/services.py); without it, only this fan-out's count."""
        self.factor, self.min_s, self.min_finished = factor, min_s, min_finished
        self.durations: list[float] = []
        self.recent: deque[float] = recent if recent is not None else deque(maxlen=RECENT)

    @property
    def enabled(self) -> bool:
        return self.factor > 0

    def finished(self, seconds: float) -> None:
        self.durations.append(seconds)
        self.recent.append(seconds)

    def baseline(self) -> tuple[list[float], str] | None:
        """The durations to compare with, and what they are; None while there are too few."""
        if len(self.durations) >= self.min_finished:
            return self.durations, "finished siblings"
        if len(self.recent) >= MIN_RECENT:
            return list(self.recent), "recent branches of this model"
        return None

    def threshold(self) -> float | None:
        """Seconds after which a running branch is a straggler; None without a baseline."""
        baseline = self.baseline() if self.enabled else None
        if baseline is None:
            return None
        return max(self.min_s, self.factor * statistics.median(baseline[0]))


async def _finished_within(task: asyncio.Task[Any], seconds: float) -> bool:
    """Wait up to `seconds` for `task` (a cheaper `asyncio.wait` for one task); cancelling
    the caller cancels the task."""
    loop = asyncio.get_running_loop()
    woken = loop.create_future()

    def wake(*_: object) -> None:
        if not woken.done():
            woken.set_result(None)

    timer = loop.call_later(seconds, wake)
    task.add_done_callback(wake)
    try:
        await woken
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        timer.cancel()
        task.remove_done_callback(wake)
    return task.done()


def _usable(task: asyncio.Task[dict[str, Any]]) -> bool:
    return not task.cancelled() and task.exception() is None and task.result().get("status") == "ok"


async def run_watched(run_copy: RunCopy, life: Lifecycle, watch: StragglerWatch, limit: asyncio.Semaphore) -> dict[str, Any]:
    """Run a branch (its slot already held) and, if it straggles, race it against a backup copy.

    The backup takes its own slot under `limit`. Returns the winner's record; with a
    race, `record["backup"]` tells who won, why the copy started and the loser's path.
    """
    if not watch.enabled:
        return await run_copy(life)
    started = time.monotonic()
    primary = asyncio.create_task(run_copy(life))
    if await _finished_within(primary, watch.min_s):  # the common case: no race, nothing more to set up
        record = primary.result()
        if record.get("status") == "ok":
            watch.finished(time.monotonic() - started)
        return record
    backup: asyncio.Task[dict[str, Any]] | None = None
    backup_life = Lifecycle()
    why = ""

    async def run_backup() -> dict[str, Any]:
        async with limit:
            backup_life.move("DISPATCHED", "slot acquired")
            return await run_copy(backup_life)

    try:
        while True:
            running = {t for t in (primary, backup) if t is not None and not t.done()}
            if not running:
                break
            wait_s = None
            if backup is None:
                elapsed = time.monotonic() - started
                # no backup before min_s, so the threshold (a median) is only worked out after it
                threshold = watch.threshold() if elapsed >= watch.min_s else None
                wait_s = max(0.0, (threshold if threshold is not None else watch.min_s) - elapsed)
                if threshold is not None and wait_s == 0.0:
                    baseline = watch.baseline()
                    assert baseline is not None  # a threshold is only worked out from a baseline
                    durations, what = baseline
                    why = (f"ran {elapsed:.2f}s, over {watch.factor:g}x the median "
                           f"{statistics.median(durations):.2f}s of {len(durations)} {what}")
                    backup_life.move("PENDING", f"backup copy: {why}")
                    backup = asyncio.create_task(run_backup())
                    continue
                wait_s = max(wait_s, 0.05)  # not a straggler yet (or no siblings done): look again later
            done, _ = await asyncio.wait(running, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
            if any(_usable(t) for t in done):
                break
    except asyncio.CancelledError:
        for task in (primary, backup):
            if task is not None:
                task.cancel()
        raise
    # the winner: the first usable copy (the original if both finished in the same instant)
    winner = next((t for t in (primary, backup) if t is not None and t.done() and _usable(t)), primary)
    loser = backup if winner is primary else primary
    lost_life = backup_life if winner is primary else life
    if loser is not None and not loser.done():
        lost_life.finish("CANCELLED", "the other copy finished first")
        loser.cancel()
        await asyncio.gather(loser, return_exceptions=True)
    record = await winner
    if record.get("status") == "ok":
        watch.finished(time.monotonic() - started)
    if backup is not None:
        record = {**record, "backup": {
            "winner": "original" if winner is primary else "backup", "reason": why,
            "other_transitions": list(lost_life.transitions)}}
    return record
