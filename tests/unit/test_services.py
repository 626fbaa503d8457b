"""A run uses the services its entry point made (Context.services), else the process's: a test
builds its own."""

from __future__ import annotations

from parallax.graphs.solve import graph
from parallax.runtime.services import Services, process_services, services_of
from parallax.state.context import Context
from testkit.scripted_model import scripted
from tests.unit.test_solve_graph import _error


async def test_a_run_counts_its_failures_in_its_own_services(monkeypatch):
    monkeypatch.setenv("PARALLAX_MAX_ATTEMPTS", "1")
    own = Services()
    ctx, calls = scripted(lambda p, t, i: _error(500), services=own)
    out = await graph.ainvoke({"task": "What is 4 + 5?", "mode": "vote", "votes": 3}, context=ctx)
    assert out["status"] == "failed" and len(calls) == 3
    breaker = own.breakers["ScriptedChatModel"]
    assert (
        breaker.describe() and process_services().breakers == {}
    )  # nothing leaked into the process's
    # the straggler history of the run's model is the run's services' too
    assert not process_services().recent and set(own.recent) <= {""}


def test_without_services_a_run_uses_the_processs():
    assert (
        services_of(Context()) is process_services()
        and services_of(Context(services=Services())) is not process_services()
    )


def test_a_fan_out_shares_one_object_per_name_and_key():
    import asyncio

    services = Services()
    first = services.shared("fan-1", asyncio.Event, "limit")
    assert services.shared("fan-1", asyncio.Event, "limit") is first
    assert services.shared("fan-2", asyncio.Event, "limit") is not first
    board, release = services.held("trace-1", dict, "plan-dag", 0)
    assert services.held("trace-1", dict, "plan-dag", 0)[0] is board
    release()
    assert services.held("trace-1", dict, "plan-dag", 0)[0] is not board
