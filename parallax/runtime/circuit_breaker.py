"""A circuit breaker per model endpoint, shared by every branch in the process.

When an endpoint fails K times in a row (429, 5xx, timeouts, connection errors), every
branch retrying against it only adds load and waits out its own backoff. The breaker
opens instead: calls fail fast with `CircuitOpen` until `reset_s` has passed, then one
probe call is let through (half-open); its success closes the circuit, its failure
opens it again. Client errors (400 and the like) say the endpoint is up and do not count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from parallax.runtime import settings as settings_mod


class CircuitOpen(RuntimeError):
    """The endpoint's circuit is open: the call was not made."""


@dataclass
class CircuitBreaker:
    endpoint: str
    threshold: int = 10
    reset_s: float = 30.0
    failures: int = 0
    opened_at: float | None = None
    probing: bool = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if time.monotonic() - self.opened_at >= self.reset_s else "open"

    def before_call(self) -> None:
        """Raise CircuitOpen unless a call may go out now (closed, or the one half-open probe)."""
        state = self.state
        if state == "closed":
            return
        if state == "open" or self.probing:
            wait = max(0.0, self.reset_s - (time.monotonic() - (self.opened_at or 0.0)))
            raise CircuitOpen(f"circuit open for {self.endpoint} after {self.failures} consecutive failures"
                              + (f"; next probe in {wait:.0f} s" if state == "open" else "; a probe is in flight"))
        self.probing = True

    def record_success(self) -> None:
        self.failures, self.opened_at, self.probing = 0, None, False

    def record_failure(self) -> None:
        self.failures += 1
        if self.probing or self.failures >= self.threshold:
            self.opened_at = time.monotonic()
        self.probing = False


_breakers: dict[str, CircuitBreaker] = {}


def breaker_for(endpoint: str) -> CircuitBreaker:
    """The process-wide breaker of an endpoint (PARALLAX_BREAKER_FAILURES, PARALLAX_BREAKER_RESET_S)."""
    breaker = _breakers.get(endpoint)
    if breaker is None:
        settings = settings_mod.load()
        breaker = _breakers[endpoint] = CircuitBreaker(
            endpoint, threshold=settings.breaker_failures, reset_s=settings.breaker_reset_s)
    return breaker


def open_circuits() -> int:
    """How many endpoints' circuits are not closed (open, or half-open waiting for a probe)."""
    return sum(breaker.state != "closed" for breaker in list(_breakers.values()))


def reset_breakers() -> None:
    """Forget every breaker (tests; a long-lived process after a configuration change)."""
    _breakers.clear()
