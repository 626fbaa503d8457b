"""A circuit breaker per model endpoint, shared by every branch in the process.

It opens on a failure rate over a sliding window (a burst counts once), lets one probe out after
`reset_s`, and lets calls wait for that probe within their own deadline.
See docs/internals/model-calls.md#circuit-breaker.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

PROBE_POLL_S = 0.05
"""How often a waiting call looks whether the half-open probe has come back."""


class CircuitOpen(RuntimeError):
    """The endpoint's circuit is open: the call was not made. The message names the endpoint and
    since when it fails."""


def clock_time(wall: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(wall))


@dataclass
class CircuitBreaker:
    endpoint: str
    failure_rate: float = 0.5
    min_calls: int = 10
    min_failures: int = 5
    window_s: float = 60.0
    coalesce_s: float = 1.0
    reset_s: float = 30.0
    clock: Callable[[], float] = time.monotonic
    calls: deque[tuple[float, bool]] = field(default_factory=deque)
    """(time, ok) per counted call of the window; a failure's time is its event's first failure."""
    opened_at: float | None = None
    probing: bool = False
    failing_since: float | None = None
    """Wall time of the first failure since the last success (None while the endpoint answers)."""
    last_error: str = ""
    probe_failed: bool = False
    """A probe failed since the circuit last closed: calls do not wait for the next one."""
    _event_at: float | None = None
    """When the latest failure event began: failures until `coalesce_s` after it are part of it."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # --- what the window says ------------------------------------------------------

    def _trim(self, now: float) -> None:
        while self.calls and self.calls[0][0] <= now - self.window_s:
            self.calls.popleft()

    def counts(self) -> tuple[int, int]:
        """(calls, failed calls) in the window, simultaneous failures counted once."""
        with self._lock:
            self._trim(self.clock())
            return len(self.calls), sum(1 for _, ok in self.calls if not ok)

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if self.clock() - self.opened_at >= self.reset_s else "open"

    def describe(self) -> str:
        """Which endpoint, since when it fails, what the window holds and the last error."""
        calls, failed = self.counts()
        since = ""
        if self.failing_since is not None:
            since = (
                f" since {clock_time(self.failing_since)} ({time.time() - self.failing_since:.0f} s"
                " ago)"
            )
        last = f"; last error: {self.last_error}" if self.last_error else ""
        return (
            f"{self.endpoint} failing{since}: {failed} of {calls} calls in the last"
            f" {self.window_s:g} s failed (failures within {self.coalesce_s:g} s counted"
            f" once){last}"
        )

    # --- the rules -----------------------------------------------------------------

    def _should_open(self) -> bool:
        calls = len(self.calls)
        failed = sum(1 for _, ok in self.calls if not ok)
        return (
            calls >= self.min_calls
            and failed >= self.min_failures
            and failed >= self.failure_rate * calls
        )

    def try_enter(self) -> str | None:
        """ "call" if a call may go out now (closed), "probe" if it goes out as the half-open probe,
        else None."""
        with self._lock:
            state = self.state
            if state == "closed":
                return "call"
            if state == "half-open" and not self.probing:
                self.probing = True
                return "probe"
            return None

    def record_success(self) -> None:
        with self._lock:
            now = self.clock()
            if self.opened_at is not None:  # the probe came back: a fresh window
                self.calls.clear()
                self._event_at = None
            self.opened_at, self.probing, self.failing_since, self.probe_failed = (
                None,
                False,
                None,
                False,
            )
            self.calls.append((now, True))
            self._trim(now)

    def record_failure(self, error: str = "", *, probe: bool = False) -> None:
        """A transient failure; `probe` when it was the half-open probe's. A call that went out
        before the circuit opened and fails while it is open counts in the window, and moves nothing
        else.
        """
        with self._lock:
            now = self.clock()
            self._trim(now)
            self.last_error = error[:200] or self.last_error
            if self.failing_since is None:
                self.failing_since = time.time()
            if self._event_at is None or now - self._event_at >= self.coalesce_s:
                self._event_at = now  # a new failure event; else part of the one under way
                self.calls.append((now, False))
            if probe:
                self.probe_failed, self.probing, self.opened_at = True, False, now
            elif self.opened_at is None and self._should_open():
                self.opened_at = now

    def release_probe(self) -> None:
        """The probe ended without a verdict on the endpoint (cancelled, or an error of ours): let
        another probe."""
        with self._lock:
            self.probing = False

    async def admit(self, deadline: float) -> bool:
        """Return when a call may go out (True if it is the half-open probe); wait for the probe if
        it can come back before `deadline` (a `clock()` time); else raise CircuitOpen naming the
        endpoint and since when.
        """
        seen_open = None
        while True:
            entered = self.try_enter()
            if entered:
                return entered == "probe"
            now, opened = self.clock(), self.opened_at
            if opened is None:  # closed between the two looks
                continue
            if self.probe_failed and (seen_open is None or opened != seen_open):
                raise CircuitOpen(
                    f"circuit open: {self.describe()}; the half-open probe failed too, next one in "
                    f"{max(0.0, opened + self.reset_s - now):.0f} s"
                )
            seen_open = opened
            probe_at = opened + self.reset_s
            wake = probe_at if now < probe_at else now + PROBE_POLL_S
            if wake >= deadline:
                wait = (
                    f"next probe in {max(0.0, probe_at - now):.0f} s"
                    if now < probe_at
                    else "a probe is in flight"
                )
                raise CircuitOpen(
                    f"circuit open: {self.describe()}; {wait}, after this call's deadline"
                )
            await asyncio.sleep(wake - now)
