"""Aegra patch: `runs.wait`, `runs.join` and the stateless wait return when the run ends.

A Redis notification wakes the waiters instead of Aegra's 2 s poll. See
docs/internals/server.md#waits-woken-by-a-notification-run_donepy.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("parallax.run_done")

POLL_S = 2.0
"""The safety net's period (Aegra's own): how late a wait is when no notification reaches it."""
RESUBSCRIBE_S = 1.0
"""Pause before the subscriber reconnects after Redis failed it."""


def channel() -> str:
    from aegra_api.settings import settings

    return f"{settings.redis.REDIS_CHANNEL_PREFIX}done"


def done_key(run_id: str) -> str:
    from aegra_api.settings import settings

    return f"{settings.redis.REDIS_CHANNEL_PREFIX}done:{run_id}"


class DoneSignals:
    """One replica's subscription to the done channel, and the waiters it wakes (one event loop)."""

    def __init__(self) -> None:
        self.waiters: dict[str, set[asyncio.Event]] = {}
        self.subscribed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def watch(self, run_id: str) -> asyncio.Event:
        event = asyncio.Event()
        self.waiters.setdefault(run_id, set()).add(event)
        if self.task is None or self.task.done():  # started by the first wait, kept for the process
            self.task = asyncio.create_task(self.listen(), name="parallax-run-done")
        return event

    def unwatch(self, run_id: str, event: asyncio.Event) -> None:
        events = self.waiters.get(run_id)
        if events is not None:
            events.discard(event)
            if not events:
                del self.waiters[run_id]

    def wake(self, run_id: str) -> None:
        for event in self.waiters.get(run_id, ()):
            event.set()

    async def listen(self) -> None:
        """Subscribe, wake the waiters of each run id published; on a Redis error resubscribe
        (waiters poll meanwhile). It lives as long as the process: one idle connection per replica.
        """
        from aegra_api.core.redis_manager import redis_manager

        while True:
            pubsub = None
            try:
                pubsub = redis_manager.get_client().pubsub(ignore_subscribe_messages=True)
                await pubsub.subscribe(channel())
                self.subscribed.set()
                while True:
                    message = await pubsub.get_message(timeout=POLL_S)
                    if message is not None and message.get("type") == "message":
                        data = message["data"]
                        self.wake(data.decode() if isinstance(data, bytes) else str(data))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any Redis failure: fall back to the poll, try again
                log.warning(
                    "run-done subscription failed (%s: %s): waits poll until it is back",
                    type(exc).__name__,
                    exc,
                )
                self.subscribed.clear()
                await asyncio.sleep(RESUBSCRIBE_S)
            finally:
                self.subscribed.clear()
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()


_signals: dict[asyncio.AbstractEventLoop, DoneSignals] = {}


def signals() -> DoneSignals:
    loop = asyncio.get_running_loop()
    if loop not in _signals:
        for old in [other for other in _signals if other.is_closed()]:
            del _signals[old]
        _signals[loop] = DoneSignals()
    return _signals[loop]


async def publish_done(run_id: str) -> None:
    """Tell every replica's waiters that `run_id` ended (best effort: the poll is the safety
    net)."""
    from aegra_api.core.redis_manager import redis_manager

    try:
        await redis_manager.get_client().publish(channel(), run_id)
    except Exception as exc:  # noqa: BLE001
        log.debug("run-done publish failed for %s: %s", run_id, exc)


async def wait_for_completion(
    run_id: str,
    *,
    timeout: float = 300.0,
    is_terminal: Callable[[str], Awaitable[bool]] | None = None,
) -> str:
    """Return once `run_id` has ended ("notified" or "polled": how it was seen); TimeoutError after
    `timeout`. `is_terminal` reads the runs table (Aegra's `_is_run_terminal`)."""
    from aegra_api.core.redis_manager import redis_manager

    from parallax.server import metrics

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    hub = signals()
    event = hub.watch(run_id)
    client = redis_manager.get_client()
    polls = 0
    try:
        with contextlib.suppress(
            TimeoutError
        ):  # subscribed before the first look, so no end goes unseen
            await asyncio.wait_for(hub.subscribed.wait(), min(timeout, POLL_S))
        while True:
            notified = event.is_set()
            event.clear()
            try:
                if await client.exists(done_key(run_id)):
                    how = "notified" if notified else "polled" if polls else "already"
                    break
            except Exception as exc:  # noqa: BLE001 - Redis down: the runs table below still answers
                log.debug(
                    "run-done key of %s unreadable (%s): the runs table answers",
                    run_id,
                    type(exc).__name__,
                )
            if polls % 2 == 1 and is_terminal is not None and await is_terminal(run_id):
                how = "polled"
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                metrics.RUN_WAITS.labels(ended="timeout").inc()
                raise TimeoutError(f"Run {run_id} did not complete within {timeout}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(remaining, POLL_S))
            if not event.is_set():
                polls += 1
    finally:
        hub.unwatch(run_id, event)
    metrics.RUN_WAITS.labels(ended=how).inc()
    return how


def install() -> None:
    """Make `run_executor._signal_run_done` publish and `WorkerExecutor.wait_for_completion` the
    notified wait; a second call changes nothing."""
    from aegra_api.services import run_executor, worker_executor

    original_signal = run_executor._signal_run_done
    if getattr(original_signal, "parallax_notifies", False):
        return
    is_terminal = worker_executor._is_run_terminal

    @functools.wraps(original_signal)
    async def signal_run_done(run_id: str) -> None:
        await original_signal(run_id)
        await publish_done(run_id)

    @functools.wraps(worker_executor.WorkerExecutor.wait_for_completion)
    async def notified_wait(self: Any, run_id: str, *, timeout: float = 300.0) -> None:
        await wait_for_completion(run_id, timeout=timeout, is_terminal=is_terminal)

    signal_run_done.parallax_notifies = True  # type: ignore[attr-defined]
    run_executor._signal_run_done = signal_run_done
    worker_executor.WorkerExecutor.wait_for_completion = notified_wait
