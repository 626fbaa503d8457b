"""The per-endpoint circuit breaker: opens after K consecutive failures, fails fast, probes."""

from __future__ import annotations

import time

import pytest

from parallax.graphs.solve import graph
from parallax.runtime.circuit_breaker import CircuitBreaker, CircuitOpen
from tests.support.scripted_model import scripted
from tests.unit.test_solve_graph import _error, answer


def test_opens_after_k_failures_fails_fast_then_lets_one_probe_through():
    breaker = CircuitBreaker("http://model.test", threshold=3, reset_s=0.05)
    for _ in range(2):
        breaker.before_call()
        breaker.record_failure()
    assert breaker.state == "closed"
    breaker.before_call()
    breaker.record_failure()
    assert breaker.state == "open"
    with pytest.raises(CircuitOpen, match="after 3 consecutive failures"):
        breaker.before_call()
    time.sleep(0.06)
    breaker.before_call()  # the half-open probe
    with pytest.raises(CircuitOpen, match="probe is in flight"):
        breaker.before_call()
    breaker.record_success()
    assert breaker.state == "closed" and breaker.failures == 0


def test_a_failed_probe_opens_the_circuit_again():
    breaker = CircuitBreaker("e", threshold=2, reset_s=0.01)
    breaker.record_failure(), breaker.record_failure()
    time.sleep(0.02)
    breaker.before_call()
    breaker.record_failure()
    assert breaker.state == "open"


async def test_branches_fail_fast_once_the_endpoint_circuit_is_open(monkeypatch):
    monkeypatch.setenv("PARALLAX_BREAKER_FAILURES", "3")
    monkeypatch.setenv("PARALLAX_BREAKER_RESET_S", "60")
    model_ctx, calls = scripted(lambda p, t, i: _error(500))
    first = await graph.ainvoke({"task": "What is 2 + 2?", "mode": "vote", "votes": 1}, context=model_ctx)
    assert first["status"] == "failed" and len(calls) == 3  # three attempts, then the circuit opens
    second = await graph.ainvoke({"task": "What is 3 + 3?", "mode": "vote", "votes": 2}, context=model_ctx)
    assert second["status"] == "failed" and len(calls) == 3  # no call reached the endpoint
    assert "circuit open" in second["reason"]


async def test_client_errors_do_not_trip_the_breaker(monkeypatch):
    monkeypatch.setenv("PARALLAX_BREAKER_FAILURES", "2")
    seen = []

    def script(prompt, t, i):
        seen.append(i)
        return _error(400) if len(seen) <= 4 else answer("4")

    model_ctx, _ = scripted(script)
    await graph.ainvoke({"task": "What is 2 + 2?", "mode": "vote", "votes": 4}, context=model_ctx)
    out = await graph.ainvoke({"task": "What is 2 + 2?", "mode": "vote", "votes": 1}, context=model_ctx)
    assert out["status"] == "ok" and out["vote_counts"] == {"4": 1}
