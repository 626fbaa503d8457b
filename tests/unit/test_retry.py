"""How long a branch waits before it tries again: what the server asked for in `Retry-After`, else
backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import openai
import pytest

from parallax.runtime.retry import retry_after, with_retries
from parallax.state.lifecycle import Lifecycle


def rate_limited(retry_after_header: str | None) -> openai.RateLimitError:
    headers = {"retry-after": retry_after_header} if retry_after_header is not None else {}
    response = httpx.Response(
        429, headers=headers, request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    )
    return openai.RateLimitError("rate limited", response=response, body=None)


def dispatched() -> Lifecycle:
    life = Lifecycle()
    life.move("PENDING")
    life.move("DISPATCHED")
    return life


def test_retry_after_in_seconds_or_as_an_http_date():
    assert retry_after(rate_limited("7")) == 7.0
    assert retry_after(rate_limited("600")) == 60.0  # capped at a minute
    in_ten = format_datetime(datetime.now(UTC) + timedelta(seconds=10), usegmt=True)
    assert 8.0 <= retry_after(rate_limited(in_ten)) <= 10.0
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert retry_after(rate_limited(past)) == 0.0  # a date gone by: try now
    assert retry_after(rate_limited("soon")) is None and retry_after(rate_limited(None)) is None


async def test_the_wait_is_the_servers_date_and_is_recorded(monkeypatch):
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("asyncio.sleep", sleep)
    calls = iter(
        [
            rate_limited(format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)),
            "done",
        ]
    )

    life = dispatched()

    async def call_once() -> str:
        life.move("IN_PROGRESS")
        result = next(calls)
        if isinstance(result, Exception):
            life.move("FAILED", type(result).__name__)
            raise result
        return result

    assert await with_retries(call_once, 3, life) == "done"
    assert len(slept) == 1 and 28.0 <= slept[0] <= 30.0
    assert [t["state"] for t in life.transitions] == [
        "PENDING",
        "DISPATCHED",
        "IN_PROGRESS",
        "FAILED",
        "RETRY",
        "IN_PROGRESS",
    ]
    assert life.transitions[4]["reason"] == f"backoff {slept[0]:.2f}s"


async def test_backoff_grows_and_stops_after_the_last_attempt(monkeypatch):
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("asyncio.sleep", sleep)
    attempts = 0

    life = dispatched()

    async def call_once() -> str:
        nonlocal attempts
        attempts += 1
        life.move("IN_PROGRESS")
        life.move("FAILED", "APIConnectionError")
        raise openai.APIConnectionError(
            request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
        )

    with pytest.raises(openai.APIConnectionError):
        await with_retries(call_once, 4, life)
    assert attempts == 4 and len(slept) == 3
    assert 0.25 <= slept[0] <= 0.75 and 0.5 <= slept[1] <= 1.0 and 1.0 <= slept[2] <= 1.5
