"""The per-endpoint circuit breaker: a failure rate over a window with a minimum of calls,
simultaneous failures counted once, a half-open probe that waiting calls share within their own
deadline."""

from __future__ import annotations

import asyncio

import pytest

from parallax.graphs.solve import graph
from parallax.runtime.circuit_breaker import CircuitBreaker, CircuitOpen
from testkit.scripted_model import scripted
from tests.unit.test_solve_graph import _error, answer


class Clock:
    """A hand-moved monotonic clock: the rules are about time, the tests should not sleep for
    them."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def breaker(clock: Clock, **rules) -> CircuitBreaker:
    defaults = {
        "failure_rate": 0.5,
        "min_calls": 4,
        "min_failures": 2,
        "window_s": 60.0,
        "coalesce_s": 1.0,
        "reset_s": 30.0,
    }
    return CircuitBreaker("http://model.test/v1", clock=clock, **{**defaults, **rules})


def fail_at(b: CircuitBreaker, clock: Clock, *moments: float) -> None:
    for moment in moments:
        clock.now = 1000.0 + moment
        b.record_failure("APIConnectionError: Connection error.")


def test_failures_at_the_same_moment_count_as_one_and_do_not_open_the_circuit():
    clock = Clock()
    b = breaker(clock)
    fail_at(b, clock, *[i / 1000 for i in range(45)])  # a burst: 45 failures within 45 ms
    fail_at(b, clock, 0.5, 0.9)  # their retries, still inside the same second
    assert b.counts() == (1, 1) and b.state == "closed"


def test_the_rate_is_judged_only_from_the_minimum_number_of_calls():
    clock = Clock()
    b = breaker(clock, min_calls=4, min_failures=1)
    fail_at(b, clock, 0, 2, 4)  # three separate failures, 100 %, but only three calls
    assert b.counts() == (3, 3) and b.state == "closed"
    fail_at(b, clock, 6)
    assert b.state == "open"


def test_a_failure_rate_below_the_threshold_keeps_the_circuit_closed():
    clock = Clock()
    b = breaker(clock, failure_rate=0.5, min_calls=4, min_failures=2)
    for t in range(6):
        clock.now = 1000.0 + t
        b.record_success()
    fail_at(b, clock, 10, 12, 14, 16, 18)  # 5 failed of 11 calls: 45 %
    assert b.counts() == (11, 5) and b.state == "closed"
    fail_at(b, clock, 20)  # 6 of 12: 50 %
    assert b.state == "open"


def test_only_calls_inside_the_window_count():
    clock = Clock()
    b = breaker(clock, window_s=10.0, min_calls=3, min_failures=3)
    fail_at(b, clock, 0, 5)
    fail_at(b, clock, 12)  # the first failure (t=0) has left the window
    assert b.counts() == (2, 2) and b.state == "closed"
    fail_at(b, clock, 14)
    assert b.counts() == (3, 3) and b.state == "open"


def test_open_then_one_probe_whose_success_closes_with_a_fresh_window():
    clock = Clock()
    b = breaker(clock, min_calls=2)
    fail_at(b, clock, 0, 2)
    assert b.state == "open" and b.try_enter() is None
    clock.now += 30
    assert b.state == "half-open"
    assert b.try_enter() == "probe"
    assert b.try_enter() is None  # no second probe while it is out
    b.record_success()
    assert b.state == "closed" and b.counts() == (1, 0) and b.failing_since is None


def test_a_failed_probe_opens_the_circuit_again():
    clock = Clock()
    b = breaker(clock, min_calls=2)
    fail_at(b, clock, 0, 2)
    clock.now += 30
    fail_at(b, clock, 32.2)  # a call sent before the circuit opened fails late: it moves nothing
    assert b.state == "half-open" and b.opened_at == 1002.0
    assert b.try_enter() == "probe"
    clock.now = 1032.5
    b.record_failure("APIConnectionError: Connection error.", probe=True)
    assert b.state == "open" and b.opened_at == clock.now and b.probe_failed


async def test_a_call_that_meets_an_open_circuit_waits_for_the_probe_within_its_deadline():
    b = CircuitBreaker("http://model.test/v1", min_calls=1, min_failures=1, reset_s=0.2)
    b.record_failure("APIConnectionError: Connection error.")
    assert b.state == "open"
    waiters = [asyncio.create_task(b.admit(b.clock() + 5.0)) for _ in range(3)]
    await asyncio.sleep(0.3)  # the reset time has passed: one waiter went out as the probe
    done = [w for w in waiters if w.done()]
    assert len(done) == 1 and b.probing
    b.record_success()  # the probe came back: the others go out too
    await asyncio.wait_for(asyncio.gather(*waiters), 2.0)
    assert b.state == "closed"


async def test_waiting_calls_fail_with_the_endpoint_and_since_when_if_the_probe_fails():
    b = CircuitBreaker("http://model.test/v1", min_calls=1, min_failures=1, reset_s=0.1)
    b.record_failure("APIConnectionError: Connection error.")
    prober, waiter = (
        asyncio.create_task(b.admit(b.clock() + 5.0)),
        asyncio.create_task(b.admit(b.clock() + 5.0)),
    )
    await asyncio.sleep(0.2)
    assert prober.done() ^ waiter.done()
    b.record_failure("APIConnectionError: Connection error.", probe=True)  # the probe failed
    other = waiter if prober.done() else prober
    with pytest.raises(
        CircuitOpen, match=r"http://model.test/v1 failing since \d\d:\d\d:\d\d UTC.*probe failed"
    ):
        await asyncio.wait_for(other, 2.0)


async def test_a_call_whose_deadline_comes_before_the_probe_fails_at_once_naming_the_endpoint():
    b = CircuitBreaker("http://model.test/v1", min_calls=1, min_failures=1, reset_s=60)
    b.record_failure("APIConnectionError: Connection error.")
    with pytest.raises(CircuitOpen) as raised:
        await asyncio.wait_for(b.admit(b.clock() + 1.0), 0.5)  # would time out here if it waited
    message = str(raised.value)
    assert "http://model.test/v1 failing since" in message and "next probe in 60 s" in message
    assert "last error: APIConnectionError" in message


async def test_branches_fail_fast_once_the_endpoint_circuit_is_open(monkeypatch):
    monkeypatch.setenv("PARALLAX_BREAKER_MIN_CALLS", "1")
    monkeypatch.setenv("PARALLAX_BREAKER_FAILURES", "1")
    monkeypatch.setenv("PARALLAX_BREAKER_RESET_S", "600")
    model_ctx, calls = scripted(lambda p, t, i: _error(500))
    first = await graph.ainvoke(
        {"task": "What is 2 + 2?", "mode": "vote", "votes": 1}, context=model_ctx
    )
    assert (
        first["status"] == "failed" and len(calls) == 1
    )  # the first failure opened it: no retry went out
    second = await graph.ainvoke(
        {"task": "What is 3 + 3?", "mode": "vote", "votes": 2}, context=model_ctx
    )
    assert second["status"] == "failed" and len(calls) == 1  # no call reached the endpoint
    assert (
        "circuit open" in second["reason"] and "ScriptedChatModel failing since" in second["reason"]
    )
    assert {b["cause"] for b in second["branches"] if b["kind"] == "vote"} == {"circuit_open"}


async def test_client_errors_do_not_trip_the_breaker(monkeypatch):
    monkeypatch.setenv("PARALLAX_BREAKER_MIN_CALLS", "1")
    monkeypatch.setenv("PARALLAX_BREAKER_FAILURES", "1")
    seen = []

    def script(prompt, t, i):
        seen.append(i)
        return _error(400) if len(seen) <= 4 else answer("4")

    model_ctx, _ = scripted(script)
    await graph.ainvoke({"task": "What is 2 + 2?", "mode": "vote", "votes": 4}, context=model_ctx)
    out = await graph.ainvoke(
        {"task": "What is 2 + 2?", "mode": "vote", "votes": 1}, context=model_ctx
    )
    assert out["status"] == "ok" and out["vote_counts"] == {"4": 1}
