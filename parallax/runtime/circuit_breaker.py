"""A circuit breaker per model endpoint, shared by every branch in the process.

Why: when an endpoint is down, every branch retrying against it only adds load and waits out
its own backoff; better to stop calling it and say so. But a breaker that counts consecutive
failures opens on one burst: forty branches that meet a full accept queue at the same moment
are forty "failures" within milliseconds, although the endpoint serves all of them a second
later, and an eval whose calls were refused reports a wrong accuracy. So the rules are
those of resilience4j's and Polly's rate breakers, plus one of our own:

- **Rate over a sliding window.** Only calls of the last `window_s` seconds count. The circuit
  opens when they number at least `min_calls`, at least `failure_rate` of them failed, and the
  failures are at least `min_failures`.
- **Simultaneous failures are one event.** Failures within `coalesce_s` (default 1 s) of the
  first failure of an event count as one failed call: a burst is one moment of trouble, not
  forty. A success always counts as one call.
- **Open, then one probe.** An open circuit lets no call out for `reset_s`; then one call
  goes out as the half-open probe. Its success closes the circuit (with a fresh window), its
  failure opens it again.
- **Wait within the deadline.** A call that meets an open circuit waits for the probe when
  the probe (and its outcome) can come before the call's own deadline, and goes on if the
  probe succeeded. Otherwise (no probe before the deadline, or the probe failed) it fails at
  once with `CircuitOpen`, whose message names the endpoint and since when it has failed.
- **Down is down.** Once a probe has failed, the endpoint is known to be down, not merely
  busy: until a probe succeeds, calls that meet the open circuit fail at once instead of
  waiting out `reset_s` (the probes go on, one per `reset_s`).

Client errors (400 and the like) say the endpoint is up and count as successes; so does a
reply that fails to parse. The breaker itself never sleeps while holding state: the waiting
is `await admit(deadline)`, so it works on any event loop and in any thread.
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
    """The endpoint's circuit is open: the call was not made. The message names the endpoint and since when it fails."""


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
            since = f" since {clock_time(self.failing_since)} ({time.time() - self.failing_since:.0f} s ago)"
        last = f"; last error: {self.last_error}" if self.last_error else ""
        return (f"{self.endpoint} failing{since}: {failed} of {calls} calls in the last {self.window_s:g} s failed "
                f"(failures within {self.coalesce_s:g} s counted once){last}")

    # --- the rules -----------------------------------------------------------------

    def _should_open(self) -> bool:
        calls = len(self.calls)
        failed = sum(1 for _, ok in self.calls if not ok)
        return calls >= self.min_calls and failed >= self.min_failures and failed >= self.failure_rate * calls

    def try_enter(self) -> str | None:
        """"call" if a call may go out now (closed), "probe" if it goes out as the half-open probe, else None."""
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
            self.opened_at, self.probing, self.failing_since, self.probe_failed = None, False, None, False
            self.calls.append((now, True))
            self._trim(now)

    def record_failure(self, error: str = "", *, probe: bool = False) -> None:
        """A transient failure; `probe` when it was the half-open probe's. A call that went out before
        the circuit opened and fails while it is open counts in the window, and moves nothing else."""
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
        """The probe ended without a verdict on the endpoint (cancelled, or an error of ours): let another probe."""
        with self._lock:
            self.probing = False

    async def admit(self, deadline: float) -> bool:
        """Return when a call may go out (True if it is the half-open probe); wait for the probe if it can
        come back before `deadline` (a `clock()` time); else raise CircuitOpen naming the endpoint and since when."""
        seen_open = None
        while True:
            entered = self.try_enter()
            if entered:
                return entered == "probe"
            now, opened = self.clock(), self.opened_at
            if opened is None:  # closed between the two looks
                continue
            if self.probe_failed and (seen_open is None or opened != seen_open):
                raise CircuitOpen(f"circuit open: {self.describe()}; the half-open probe failed too, next one in "
                                  f"{max(0.0, opened + self.reset_s - now):.0f} s")
            seen_open = opened
            probe_at = opened + self.reset_s
            wake = probe_at if now < probe_at else now + PROBE_POLL_S
            if wake >= deadline:
                wait = f"next probe in {max(0.0, probe_at - now):.0f} s" if now < probe_at else "a probe is in flight"
                raise CircuitOpen(f"circuit open: {self.describe()}; {wait}, after this call's deadline")
            await asyncio.sleep(wake - now)
