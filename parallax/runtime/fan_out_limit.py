"""One limit on model calls in flight, shared by all tasks of a fan-out.

Used instead of LangGraph's `max_concurrency`, which would also queue finished branches' checkpoint
writes. See docs/internals/model-calls.md#the-fan-outs-limit.
"""

from __future__ import annotations

import asyncio

from parallax.runtime.services import Services


def fan_out_limit(services: Services, fan_out: str, size: int) -> asyncio.Semaphore:
    """The semaphore every task of fan-out `fan_out` shares."""
    return services.shared(fan_out, lambda: asyncio.Semaphore(size), "limit", size)
