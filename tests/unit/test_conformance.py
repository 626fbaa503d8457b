"""The Agent Server's fields and routes Aegra does not honour (server/conformance.py): each refused
by name when its value would change what happens, and never when langgraph-sdk sends what it sends
by default.

The requests are the SDK's own: langgraph-sdk's client, on an httpx transport that keeps what it
would send. The same rules against a running deployment:
tests/integration/test_deploy_conformance.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient

from parallax.server import conformance
from parallax.server.refusals import Refused

THREAD = "5b1f3f5e-8f0c-4a53-9a49-3c9f3e0d6a11"
ASK = {"task": "What is 2 + 2?"}


def sent(call: Callable[[LangGraphClient], Awaitable[Any]]) -> tuple[str, str, Any]:
    """(method, path, JSON body) of the one request the SDK makes for `call`."""
    kept: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        kept.append(request)
        if request.url.path.endswith("/stream"):
            return httpx.Response(
                200,
                headers={"content-type": "text/event-stream"},
                content=b"event: end\ndata: null\n\n",
            )
        return httpx.Response(200, json=0 if request.url.path.endswith("/count") else {})

    async def run() -> None:
        async with httpx.AsyncClient(
            base_url="http://parallax", transport=httpx.MockTransport(answer)
        ) as http:
            client = LangGraphClient(http)
            result = call(client)
            if hasattr(result, "__aiter__"):
                async for _ in result:
                    pass
            else:
                await result

    asyncio.run(run())
    assert len(kept) == 1
    body = json.loads(kept[0].content) if kept[0].content else None
    return kept[0].method, kept[0].url.path, body


def refusal(method: str, path: str, body: Any) -> Refused:
    with pytest.raises(Refused) as refused:
        conformance.check_fields(method, path, body)
    return refused.value


ORDINARY = [
    lambda c: c.runs.create(THREAD, "solve", input=ASK),
    lambda c: c.runs.create(None, "solve", input=ASK),
    lambda c: c.runs.stream(THREAD, "solve", input=ASK),
    lambda c: c.runs.stream(
        None, "solve", input=ASK, stream_mode=["values", "updates"], stream_subgraphs=True
    ),
    lambda c: c.runs.wait(THREAD, "solve", input=ASK),
    lambda c: c.runs.wait(None, "solve", input=ASK, on_completion="keep"),
    lambda c: c.runs.stream(
        THREAD, "chat", command={"resume": "yes"}, on_disconnect="cancel", stream_resumable=True
    ),
    lambda c: c.runs.wait(
        THREAD,
        "solve",
        input=ASK,
        if_not_exists="create",
        on_disconnect="continue",
        durability="sync",
        multitask_strategy="enqueue",
    ),
    lambda c: c.runs.stream(
        THREAD, "solve", input=ASK, after_seconds=0, feedback_keys=[], if_not_exists="reject"
    ),
    lambda c: c.crons.create("loop", schedule="0 * * * *", input={}),
    lambda c: c.crons.create_for_thread(THREAD, "loop", schedule="0 * * * *", input={}),
    lambda c: c.threads.create(metadata={"topic": "x"}),
    lambda c: c.threads.create(thread_id=THREAD, if_exists="do_nothing", graph_id="chat"),
    lambda c: c.threads.update(THREAD, metadata={"topic": "y"}),
    lambda c: c.threads.search(metadata={"topic": "x"}, status="idle", limit=5),
    lambda c: c.threads.count(metadata={"topic": "x"}, status="idle"),
    lambda c: c.store.put_item(["notes"], "k", {"v": 1}),
    lambda c: c.store.put_item(["notes"], "k", {"v": 1}, index=False),
    lambda c: c.store.search_items(["notes"], filter={"v": 1}, limit=5),
    lambda c: c.assistants.search(graph_id="solve"),
]


@pytest.mark.parametrize("call", ORDINARY)
def test_the_sdks_ordinary_calls_are_not_refused(call):
    method, path, body = sent(call)
    conformance.check_fields(method, path, body)  # no Refused


REFUSED = [
    (
        lambda c: c.runs.create(THREAD, "solve", input=ASK, after_seconds=30),
        "after_seconds",
        "cron",
    ),
    (
        lambda c: c.runs.stream(None, "solve", input=ASK, after_seconds=5),
        "after_seconds",
        "starts as soon",
    ),
    (
        lambda c: c.runs.stream(THREAD, "solve", input=ASK, feedback_keys=["correct"]),
        "feedback_keys",
        "feedback graph",
    ),
    (
        lambda c: c.runs.wait(THREAD, "solve", input=ASK, langsmith_tracing={"project_name": "p"}),
        "langsmith_tracer",
        "OpenTelemetry",
    ),
    (
        lambda c: c.runs.wait(THREAD, "solve", input=ASK, on_disconnect="cancel"),
        "on_disconnect",
        "/wait",
    ),
    (
        lambda c: c.runs.wait(None, "solve", input=ASK, on_disconnect="cancel"),
        "on_disconnect",
        "/wait",
    ),
    (
        lambda c: c.threads.create(
            supersteps=[{"updates": [{"values": {"tenant": "beta"}, "as_node": "entry"}]}]
        ),
        "supersteps",
        "written by its graph's nodes",
    ),
    (lambda c: c.threads.search(ids=[THREAD]), "ids", "GET /threads/{id}"),
    (lambda c: c.threads.search(values={"answer": "4"}), "values", "metadata"),
    (lambda c: c.threads.search(extract={"a": "values.answer"}), "extract", "state"),
    (lambda c: c.threads.count(values={"answer": "4"}), "values", "metadata"),
    (
        lambda c: c.store.put_item(["notes"], "k", {"v": 1}, index=["v"]),
        "index",
        "no embedding index",
    ),
    (lambda c: c.store.search_items(["notes"], query="what did I say"), "query", "semantic search"),
]


@pytest.mark.parametrize(("call", "field", "says"), REFUSED)
def test_a_field_that_would_be_dropped_unread_is_refused_by_name(call, field, says):
    method, path, body = sent(call)
    refused = refusal(method, path, body)
    assert (refused.status, refused.field) == (422, field)
    assert says in refused.message and refused.message.startswith(field)


def test_if_not_exists_takes_what_langgraph_documents_and_nothing_else():
    refused = refusal(
        "POST", f"/threads/{THREAD}/runs", {"assistant_id": "solve", "if_not_exists": "maybe"}
    )
    assert (refused.field, refused.message) == ("if_not_exists", conformance.FIELDS[3].message)
    assert conformance.creates_thread({"if_not_exists": "create"})
    assert not conformance.creates_thread({}) and not conformance.creates_thread(
        {"if_not_exists": "reject"}
    )


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/runs/crons", "POST"),
        (f"/threads/{THREAD}/runs/crons", "POST"),
        ("/runs/crons/8a1c2f3e-0000-4000-8000-000000000001", "PATCH"),
    ],
)
def test_a_cron_is_held_to_the_run_fields_it_would_start_its_runs_with(path, method):
    for field, value in (
        ("after_seconds", 60),
        ("feedback_keys", ["correct"]),
        ("langsmith_tracer", {"p": 1}),
    ):
        assert refusal(method, path, {"schedule": "0 * * * *", field: value}).field == field
    conformance.check_fields(
        method, path, {"schedule": "0 * * * *", "after_seconds": 0, "stream_resumable": True}
    )


def test_a_store_filter_the_store_cannot_run_is_refused_by_name():
    """schemathesis found `{"filter": {"a": {"b": null}}}` a 500 (LangGraph's store: "Unsupported
    operator: b")."""
    assert refusal("POST", "/store/items/search", {"filter": {"a": {"b": None}}}).field == "filter"
    assert refusal("POST", "/store/items/search", {"filter": ["a"]}).field == "filter"
    conformance.check_fields(
        "POST", "/store/items/search", {"filter": {"a": 1, "b": {"$gt": 2, "$lte": 5}}}
    )
    conformance.check_fields("POST", "/store/items/search", {"filter": None})


def test_a_field_is_judged_only_on_the_routes_where_aegra_drops_it():
    conformance.check_fields(
        "POST", "/threads", {"metadata": {}, "ttl": {"ttl": 5}}
    )  # create: Aegra reads ttl
    conformance.check_fields("POST", "/store/items/search", {"ttl": 5})  # not a field of the search
    conformance.check_fields(
        "POST", f"/threads/{THREAD}/runs/stream", {"on_disconnect": "cancel"}
    )  # streams do
    conformance.check_fields(
        "PUT", "/store/items", ["not", "an", "object"]
    )  # Aegra answers a body that is no object


@pytest.mark.parametrize(
    ("method", "path", "says"),
    [
        ("POST", "/runs/batch", "POST /runs"),
        ("GET", f"/threads/{THREAD}/stream", "/stream/events"),
        ("GET", f"/threads/{THREAD}/storage", "/state"),
        ("GET", "/runs/crons/8a1c2f3e-0000-4000-8000-000000000001", "/runs/crons/search"),
    ],
)
def test_a_route_aegra_lacks_is_refused_by_name(method, path, says):
    with pytest.raises(Refused) as refused:
        conformance.check_route(method, path)
    assert refused.value.status == 422 and says in refused.value.message
    assert (
        refused.value.message.startswith(f"{method} /") and "not supported" in refused.value.message
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", f"/threads/{THREAD}/stream/events"),
        ("GET", f"/threads/{THREAD}/runs/r1/stream"),
        ("PATCH", "/runs/crons/c1"),
        ("DELETE", "/runs/crons/c1"),
        ("POST", "/runs"),
        ("GET", f"/threads/{THREAD}"),
    ],
)
def test_the_routes_aegra_serves_pass(method, path):
    conformance.check_route(method, path)


def test_a_subgraphs_namespace_in_the_path_is_served_as_aegras_query():
    method, path, _ = sent(
        lambda c: c.assistants.get_subgraphs("a1", namespace="review|inner", recurse=True)
    )
    query = b"recurse=true"
    assert conformance.rewritten(path, query) == (
        "/assistants/a1/subgraphs",
        b"recurse=true&namespace=review%7Cinner",
    )
    assert conformance.rewritten("/assistants/a1/subgraphs", b"") is None
