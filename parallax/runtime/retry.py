"""Where a branch's model call is retried: transient errors, backoff with jitter, `Retry-After`.

A transient error (429, 5xx, timeouts, connection errors) is worth another attempt; anything
else is not. The first attempt goes straight out; only after a transient error does the
retry machinery (tenacity) start, waiting an exponential backoff with jitter, or exactly
what the server asked for in `Retry-After` (capped at a minute). Each wait is recorded in
the branch's lifecycle as RETRY with its length, so `parallax trace` shows it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx
import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from parallax.state.lifecycle import Lifecycle

T = TypeVar("T")

TRANSIENT_ERRORS = (
    openai.RateLimitError,
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.InternalServerError,
    httpx.TransportError,
    asyncio.TimeoutError,
    TimeoutError,
)


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (asyncio.TimeoutError, TimeoutError, openai.APITimeoutError))


def retry_after(exc: BaseException | None) -> float | None:
    """The server's `Retry-After` in seconds (at most 60), if it sent one."""
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(header), 60.0) if header else None
    except ValueError:
        return None


def delay_after(exc: BaseException | None, failures: int) -> float:
    """Exponential backoff with jitter, or the server's Retry-After when it gives one."""
    after = retry_after(exc)
    return after if after is not None else min(20.0, 0.5 * 2 ** (failures - 1)) * random.uniform(0.5, 1.5)


def _wait(retry_state: RetryCallState) -> float:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    return delay_after(exc, retry_state.attempt_number + 1)


async def with_retries(call_once: Callable[[], Awaitable[T]], max_attempts: int, life: Lifecycle) -> T:
    """`call_once()`, tried up to `max_attempts` times while it raises a transient error."""
    try:
        return await call_once()
    except TRANSIENT_ERRORS as first:
        if max_attempts <= 1:
            raise
        retrying = AsyncRetrying(
            stop=stop_after_attempt(max_attempts - 1),
            wait=_wait,
            retry=retry_if_exception(lambda e: isinstance(e, TRANSIENT_ERRORS)),
            before_sleep=lambda state: life.move("RETRY", f"backoff {state.upcoming_sleep:.2f}s"),
            reraise=True,
        )
        delay = delay_after(first, 1)
        life.move("RETRY", f"backoff {delay:.2f}s")
        await asyncio.sleep(delay)
        return await retrying(call_once)
