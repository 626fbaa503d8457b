"""A branch's model call retried: transient errors, backoff with jitter, `Retry-After`.

See docs/internals/model-calls.md#retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import httpx
import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_base, wait_exponential, wait_random

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
MAX_RETRY_AFTER_S = 60.0


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (asyncio.TimeoutError, TimeoutError, openai.APITimeoutError))


def retry_after(exc: BaseException | None) -> float | None:
    """The server's `Retry-After` in seconds (from 0 to 60), if it sent one: a number of seconds or
    an HTTP date."""
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    if not header:
        return None
    try:
        seconds = float(header)
    except ValueError:
        try:
            when = parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT; a date without a zone is read as such
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


class wait_retry_after(wait_base):  # noqa: N801 (tenacity's names for waits)
    """Exactly the server's `Retry-After` when the failed attempt's response has one, else
    `fallback`."""

    def __init__(self, fallback: wait_base) -> None:
        self.fallback = fallback

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        after = retry_after(exc)
        return after if after is not None else self.fallback(retry_state)


WAIT: wait_base = wait_retry_after(
    wait_exponential(multiplier=0.25, max=20.0) + wait_random(0, 0.5)
)
"""After failure n: the server's Retry-After, else 0.25·2^(n-1) s (at most 20) plus up to 0.5 s of
jitter."""


async def with_retries(
    call_once: Callable[[], Awaitable[T]], max_attempts: int, life: Lifecycle
) -> T:
    """`call_once()`, tried up to `max_attempts` times while it raises a transient error."""
    try:
        return await call_once()
    except TRANSIENT_ERRORS as first:
        if max_attempts <= 1:
            raise
        failed = [first]

        async def attempt() -> T:  # tenacity's first attempt is the one that already failed
            if failed:
                raise failed.pop()
            return await call_once()

        retrying = AsyncRetrying(
            stop=stop_after_attempt(max_attempts),
            wait=WAIT,
            retry=retry_if_exception_type(TRANSIENT_ERRORS),
            before_sleep=lambda state: life.move("RETRY", f"backoff {state.upcoming_sleep:.2f}s"),
            reraise=True,
        )
        return await retrying(attempt)
