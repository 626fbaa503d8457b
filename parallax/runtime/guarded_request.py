"""One model request under its endpoint's breaker, a connection slot, the run's lease, a timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from parallax.runtime.call_attempts import Attempts
from parallax.runtime.call_errors import describe
from parallax.runtime.call_setup import Endpoint
from parallax.runtime.endpoint_limits import endpoint_slot
from parallax.runtime.failure_cause import cause_of
from parallax.runtime.lease_check import check_lease
from parallax.runtime.retry import TRANSIENT_ERRORS

R = TypeVar("R")


async def guarded(
    endpoint: Endpoint, timeout_s: float, send: Callable[[], Awaitable[R]], attempt: Attempts | None
) -> R:
    """`send()` under the endpoint's breaker, connection slot, lease and `timeout_s`.

    Args:
        attempt: the attempts it begins one of (None: it begins none, as a seat whose wave's
            request gave it no choice is already in one).
    """
    breaker = endpoint.breaker
    # an open circuit: wait for its probe if it comes back within this attempt's deadline
    probe = await breaker.admit(breaker.clock() + timeout_s)
    slots = endpoint_slot(endpoint.base_url)
    async with slots:  # waiting for a slot is ours, not the endpoint's: outside the timeout
        await check_lease(
            "model call"
        )  # a run that lost its lease calls nothing (runtime/lease_check.py)
        if attempt is not None:
            attempt.start()
        try:
            async with asyncio.timeout(timeout_s):
                reply = await send()
        except TRANSIENT_ERRORS as exc:
            breaker.record_failure(describe(exc), probe=probe)
            if cause_of(exc) == "connection":  # refused or reset: fewer connections at once
                slots.overloaded()
            if attempt is not None:
                attempt.failed(exc)
            raise
        except BaseException:
            if probe:  # not the endpoint's fault: let the next call probe
                breaker.release_probe()
            raise
    slots.succeeded()
    breaker.record_success()
    await check_lease("model reply")  # the lease was lost during the call: its reply is not used
    return reply
