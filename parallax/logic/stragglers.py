"""Backup copies for stragglers: one slow branch must not hold up a hundred finished ones.

See docs/internals/votes.md#straggler-backups.
"""

from __future__ import annotations

import asyncio
import contextvars
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

    def __init__(
        self, factor: float, min_s: float, min_finished: int = 2, recent: deque[float] | None = None
    ) -> None:
        """`recent`: the model's recent branch durations, which this watch reads and adds to (the
        process services keep them per model: runtime/services.py); without it, only this fan-out's
        count.
        """
        self.factor, self.min_s, self.min_finished = factor, min_s, min_finished
        self.durations: list[float] = []
        self.recent: deque[float] = recent if recent is not None else deque(maxlen=RECENT)
        self._due: deque[tuple[float, _Race]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None

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

    def _watch_from_min_s(self, race: _Race) -> None:
        """`race.begin()` once its branch has run `min_s`, if it still runs. One timer serves the
        fan-out, armed for the earliest branch due (branches are due in the order they started), not
        one timer per branch.
        """
        loop = asyncio.get_running_loop()
        self._due.append((loop.time() + self.min_s, race))
        if (
            self._timer is None or self._timer_loop is not loop
        ):  # none armed, or armed on a loop that has ended
            self._arm(loop)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._timer_loop = loop.call_at(self._due[0][0], self._fire), loop

    def _fire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._due and (self._due[0][1].ended or self._due[0][0] <= now):
            _, race = self._due.popleft()
            if not race.ended:
                race.begin()
        if self._due:
            self._arm(loop)

    def threshold(self) -> float | None:
        """Seconds after which a running branch is a straggler; None without a baseline."""
        baseline = self.baseline() if self.enabled else None
        if baseline is None:
            return None
        return max(self.min_s, self.factor * statistics.median(baseline[0]))


def _usable(task: asyncio.Task[dict[str, Any]]) -> bool:
    return not task.cancelled() and task.exception() is None and task.result().get("status") == "ok"


class _Race:
    """A branch's watch while its original runs in the caller's task: nothing more than its place in
    the watch's queue until the branch has run `min_s`; then a watcher task that starts the backup
    copy once the branch straggles, and that, when the backup finishes first with a usable reply,
    cancels the original (the caller's task, which `run_watched` then lets go on with the backup's
    record)."""

    def __init__(
        self, run_copy: RunCopy, life: Lifecycle, watch: StragglerWatch, limit: asyncio.Semaphore
    ) -> None:
        self.run_copy, self.life, self.watch, self.limit = run_copy, life, watch, limit
        self.started = time.monotonic()
        self.caller = asyncio.current_task()
        self.context = (
            contextvars.copy_context()
        )  # the branch's: its backup runs in it, whichever branch armed the timer
        self.cancelling = self.caller.cancelling() if self.caller is not None else 0
        self.watcher: asyncio.Task[None] | None = None
        self.backup: asyncio.Task[dict[str, Any]] | None = None
        self.backup_life = Lifecycle()
        self.why = ""
        self.took_over = False
        self.ended = False
        """The original has ended (or the caller was cancelled): no watcher starts any more."""

    def begin(self) -> None:
        """The timer: the original has run `min_s`."""
        self.watcher = asyncio.get_running_loop().create_task(self._watch(), context=self.context)

    async def _watch(self) -> None:
        watch = self.watch
        while self.backup is None:
            elapsed = time.monotonic() - self.started
            # no backup before min_s, so the threshold (a median) is only worked out after it
            threshold = watch.threshold() if elapsed >= watch.min_s else None
            wait_s = max(0.0, (threshold if threshold is not None else watch.min_s) - elapsed)
            if threshold is not None and wait_s == 0.0:
                baseline = watch.baseline()
                assert baseline is not None  # a threshold is only worked out from a baseline
                durations, what = baseline
                self.why = (
                    f"ran {elapsed:.2f}s, over {watch.factor:g}x the median "
                    f"{statistics.median(durations):.2f}s of {len(durations)} {what}"
                )
                self.backup_life.move("PENDING", f"backup copy: {self.why}")
                self.backup = asyncio.create_task(self._run_backup())
                break
            await asyncio.sleep(
                max(wait_s, 0.05)
            )  # not a straggler yet (or no siblings done): look again later
        await asyncio.wait(
            {self.backup}
        )  # waits without cancelling it when this watcher is cancelled
        if (
            _usable(self.backup) and self.caller is not None
        ):  # the backup won while the original still runs
            self.took_over = True
            self.life.finish("CANCELLED", "the other copy finished first")
            self.caller.cancel()

    async def _run_backup(self) -> dict[str, Any]:
        async with self.limit:
            self.backup_life.move("DISPATCHED", "slot acquired")
            return await self.run_copy(self.backup_life)

    def stop_watching(self) -> None:
        self.ended = True
        if self.watcher is not None and not self.watcher.done():
            self.watcher.cancel()

    def cancelled_for_backup(self) -> bool:
        """Whether the CancelledError the original got is only the watcher's, for the backup that
        won."""
        return (
            self.took_over and self.caller is not None and self.caller.uncancel() <= self.cancelling
        )

    async def settle(self, original: dict[str, Any] | None) -> dict[str, Any] | None:
        """The winner's record once the original ended (`original`: its record; None: it raised, or
        was cancelled for the backup); None when the original's exception stands. The first usable
        copy wins, the original if both are."""
        self.stop_watching()
        backup = self.backup
        if backup is None:
            return self._won(original) if original is not None else None
        if original is not None and original.get("status") == "ok":
            if not backup.done():
                self.backup_life.finish("CANCELLED", "the other copy finished first")
                backup.cancel()
                await asyncio.gather(backup, return_exceptions=True)
            return self._won(original, self.backup_life, "original")
        if not backup.done():
            await asyncio.wait({backup})
        if _usable(backup):
            return self._won(backup.result(), self.life, "backup")
        return self._won(original, self.backup_life, "original") if original is not None else None

    def _won(
        self, record: dict[str, Any], lost_life: Lifecycle | None = None, winner: str = ""
    ) -> dict[str, Any]:
        if record.get("status") == "ok":
            self.watch.finished(time.monotonic() - self.started)
        if lost_life is None:
            return record
        return {
            **record,
            "backup": {
                "winner": winner,
                "reason": self.why,
                "other_transitions": list(lost_life.transitions),
            },
        }


async def run_watched(
    run_copy: RunCopy, life: Lifecycle, watch: StragglerWatch, limit: asyncio.Semaphore
) -> dict[str, Any]:
    """Run a branch (its slot already held) and, if it straggles, race it against a backup copy.

    The original runs in the caller's task, as without a watch: until it has run `min_s`, a
    fan-out's branch costs an entry in the watch's queue (one timer serves them all), no task. The
    backup takes its own slot under `limit`. Returns the winner's record; with a race,
    `record["backup"]` tells who won, why the copy started and the loser's path.
    """
    if not watch.enabled:
        return await run_copy(life)
    race = _Race(run_copy, life, watch, limit)
    watch._watch_from_min_s(race)
    try:
        record = await run_copy(life)
    except asyncio.CancelledError:
        if race.cancelled_for_backup():
            won = await race.settle(None)
            assert won is not None  # the watcher only cancels the original for a usable backup
            return won
        race.stop_watching()
        if race.backup is not None:
            race.backup.cancel()
        raise
    except Exception:
        won = await race.settle(None)
        if won is None:
            raise
        return won
    won = await race.settle(record)
    assert won is not None
    return won
