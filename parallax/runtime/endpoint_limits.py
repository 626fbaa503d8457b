"""A cap on model calls in flight to one endpoint, shrinking when the endpoint refuses connections.

See docs/internals/model-calls.md#connections-per-endpoint.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable

import httpx

from parallax.runtime import settings as settings_mod

SIGNAL_S = 1.0
"""Connection failures within this many seconds of a cut are the same overload: one cut, not many.
"""


def max_connections() -> int:
    return settings_mod.load().endpoint_max_connections


def connection_limits() -> httpx.Limits:
    """The HTTP pool limits of an endpoint's shared client."""
    cap = max_connections()
    return httpx.Limits(max_connections=cap, max_keepalive_connections=cap)


class EndpointSlots:
    """`async with slots:` holds one of an endpoint's slots; `overloaded()` and `succeeded()` move
    the limit."""

    def __init__(self, ceiling: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ceiling, self.limit, self.in_flight = ceiling, float(ceiling), 0
        self._clock, self._cut_at = clock, float("-inf")
        self._free = asyncio.Condition()

    async def __aenter__(self) -> EndpointSlots:
        async with self._free:
            await self._free.wait_for(lambda: self.in_flight < int(self.limit))
            self.in_flight += 1
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        async with self._free:
            self.in_flight -= 1
            self._free.notify_all()

    def overloaded(self) -> None:
        """The endpoint refused or reset a connection: halve the limit, once per moment."""
        now = self._clock()
        if now - self._cut_at >= SIGNAL_S:
            self._cut_at, self.limit = now, max(1.0, min(self.limit, self.in_flight) / 2)

    def succeeded(self) -> None:
        self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)


class NoLimit:
    """The slots of a model that is no HTTP endpoint (a test's or a benchmark's own
    `Context.chat_model`)."""

    async def __aenter__(self) -> NoLimit:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def overloaded(self) -> None:
        pass

    def succeeded(self) -> None:
        pass


NO_LIMIT = NoLimit()
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, EndpointSlots]] = (
    weakref.WeakKeyDictionary()
)


def endpoint_slot(endpoint: str | None) -> EndpointSlots | NoLimit:
    """The slots of `endpoint` on this loop (created with the ceiling of the moment); no limit
    without one."""
    if not endpoint:
        return NO_LIMIT
    per_loop = _slots.setdefault(asyncio.get_running_loop(), {})
    slots = per_loop.get(endpoint)
    if slots is None:
        slots = per_loop[endpoint] = EndpointSlots(max_connections())
    return slots
