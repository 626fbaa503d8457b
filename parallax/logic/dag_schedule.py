"""A plan dispatched on dependencies, not levels: the in-process side of one dispatch superstep.

See docs/internals/plans.md#dispatch-on-dependencies.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from parallax.logic.plan_check import fingerprints, remaining_path, writes_overlap
from parallax.state.plan import FINISHED, Plan, PlanTask


class PrioritySlots:
    """At most `size` holders; when full, the next free slot goes to the waiter with the highest
    priority."""

    def __init__(self, size: int) -> None:
        self.free = size
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    async def acquire(self, priority: float) -> None:
        if self.free > 0 and not self._waiting:
            self.free -= 1
            return
        granted = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (-priority, next(self._order), granted))
        try:
            await granted
        except asyncio.CancelledError:
            if (
                granted.done() and not granted.cancelled()
            ):  # the slot arrived as we were cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, granted = heapq.heappop(self._waiting)
            if not granted.done():
                granted.set_result(None)
                return
        self.free += 1

    @asynccontextmanager
    async def slot(self, priority: float) -> AsyncIterator[None]:
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()


class WriteLocks:
    """Edit tasks whose declared files overlap never hold their files at the same time."""

    def __init__(self) -> None:
        self._held: dict[int, list[str]] = {}
        self._changed = asyncio.Condition()

    @asynccontextmanager
    async def hold(self, owner: int, writes: list[str]) -> AsyncIterator[None]:
        if not writes:
            yield
            return
        async with self._changed:
            await self._changed.wait_for(
                lambda: not any(writes_overlap(writes, w) for w in self._held.values())
            )
            self._held[owner] = list(writes)
        try:
            yield
        finally:
            async with self._changed:
                del self._held[owner]
                self._changed.notify_all()


class DagRun:
    """Who has finished, who may start, and in what order, for the tasks of one dispatch."""

    def __init__(self, plan: Plan, cap: int) -> None:
        self.plan = plan
        """The plan, validated once for all the tasks of the dispatch."""
        self.fingerprints = fingerprints(plan)
        self.on_complete: Callable[[], object] | None = None
        """Called once every task has a result (the holder of this object may then let it go)."""
        self.priority = remaining_path(plan)
        self.slots = PrioritySlots(cap)
        self.writes = WriteLocks()
        self._results: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._loaded = False
        self._loading = asyncio.Lock()

    def _future(self, task_id: int) -> asyncio.Future[dict[str, Any]]:
        if task_id not in self._results:
            self._results[task_id] = asyncio.get_running_loop().create_future()
        return self._results[task_id]

    async def load_once(self, load: Callable[[], Awaitable[dict[int, dict[str, Any]]]]) -> None:
        """Publish the results an earlier process saved (once per dispatch, whichever task asks
        first)."""
        async with self._loading:
            if not self._loaded:
                for task_id, record in (await load()).items():
                    self.publish(task_id, record)
                self._loaded = True

    def publish(self, task_id: int, record: dict[str, Any]) -> None:
        future = self._future(task_id)
        if not future.done():
            future.set_result(record)
        if self.on_complete is not None and all(self._future(t.id).done() for t in self.plan.tasks):
            self.on_complete()

    def finished(self, task_id: int) -> dict[str, Any] | None:
        future = self._future(task_id)
        return future.result() if future.done() else None

    async def results_of(self, deps: list[int]) -> dict[int, dict[str, Any]]:
        return {d: await self._future(d) for d in deps}


def blocked_by(task: PlanTask, plan: Plan, dependencies: dict[int, dict[str, Any]]) -> str:
    """Why `task` cannot run ('' if it can): a required dependency that did not finish.

    An optional dependency that failed or was skipped does not block; the task runs on what exists.
    """
    for dep in task.deps:
        record = dependencies[dep]
        if record["status"] not in FINISHED and not plan.task(dep).optional:
            why = record.get("reason") or record["status"].lower()
            return f"dependency {dep} {record['status'].lower()}: {why}"[:300]
    return ""
