"""The per-endpoint cap on calls in flight: a fixed ceiling, and a limit that halves when
connections are turned away."""

from __future__ import annotations

import asyncio

from parallax.runtime import chat_models
from parallax.runtime.endpoint_limits import EndpointSlots, endpoint_slot


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_never_more_calls_in_flight_than_the_limit():
    slots, peak, inside = EndpointSlots(3), 0, 0

    async def call():
        nonlocal peak, inside
        async with slots:
            inside += 1
            peak = max(peak, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(call() for _ in range(20)))
    assert peak == 3 and slots.in_flight == 0


async def test_turned_away_connections_halve_in_flight_once_per_moment_then_successes_climb_back():
    clock = Clock()
    slots = EndpointSlots(16, clock=clock)
    for _ in range(10):
        await slots.__aenter__()
    slots.overloaded()
    slots.overloaded()  # the same moment: one cut
    assert slots.limit == 5.0
    clock.now = 1.5
    slots.overloaded()
    assert slots.limit == 2.5
    for _ in range(10):
        await slots.__aexit__(None, None, None)
    for _ in range(200):
        slots.succeeded()
    assert slots.limit == 16.0  # back to the ceiling, never above it


async def test_the_shared_http_client_of_an_endpoint_holds_the_ceiling(monkeypatch):
    monkeypatch.setenv("PARALLAX_ENDPOINT_MAX_CONNECTIONS", "7")
    client = chat_models.http_client("http://model.test/v1")
    assert client is chat_models.http_client("http://model.test/v1")
    assert client._transport._pool._max_connections == 7
    assert endpoint_slot("http://other.test/v1").ceiling == 7
    chat_models.forget_clients()
