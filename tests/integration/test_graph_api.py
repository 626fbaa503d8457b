"""The `solve` graph served by a real `langgraph dev`, called through `langgraph_sdk`.

`langgraph dev` runs the graph under blockbuster, which raises on blocking I/O inside
the event loop, so this also proves the nodes never block it. Model calls go to the
session's shared llama.cpp server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from langgraph_sdk import get_client

from testkit.langgraph_dev import LANGGRAPH, DevServer, DevServerError, langgraph_dev
from tests.integration.conftest import MODEL_ALIAS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dev_server(model_server, tmp_path_factory) -> Iterator[DevServer]:
    if not LANGGRAPH.is_file():
        pytest.skip(f"langgraph CLI not found at {LANGGRAPH}")
    env = {
        "OPENAI_BASE_URL": model_server,
        "PARALLAX_RESPONSE_FORMAT": "json_schema",
        "PARALLAX_MODEL": MODEL_ALIAS,
        "PARALLAX_MAX_TOKENS": "128",
    }
    try:
        with langgraph_dev(tmp_path_factory.mktemp("langgraph-dev"), env) as server:
            yield server
    except DevServerError as exc:
        pytest.fail(str(exc))


@pytest.fixture(autouse=True)
def _print_log_on_failure(request, dev_server):
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"----- langgraph dev log ({dev_server.log_path}) -----\n{dev_server.log()}")


async def test_assistants_list_the_solve_graph(dev_server):
    client = get_client(url=dev_server.url)
    assistants = await client.assistants.search()
    assert "solve" in {a["graph_id"] for a in assistants}


async def test_vote_run_through_the_api(dev_server):
    client = get_client(url=dev_server.url)
    thread = await client.threads.create()
    started = time.perf_counter()
    result = await client.runs.wait(
        thread["thread_id"],
        "solve",
        input={"task": "What is 2 + 2?", "mode": "vote", "votes": 3, "tenant": "apitest"},
    )
    elapsed = time.perf_counter() - started

    assert isinstance(result, dict), result
    assert "__error__" not in result, result
    assert result["status"] in {"ok", "needs_review"}, result.get("reason")
    assert result["mode"] == "vote"
    assert len(result["trace_id"]) == 32
    kinds = sorted(b["kind"] for b in result["branches"])
    # 3 votes + safety; a judge joins only when the votes did not settle.
    assert kinds in (
        ["safety", "vote", "vote", "vote"],
        ["judge", "safety", "vote", "vote", "vote"],
    ), kinds
    assert all(b["parent_id"] == result["trace_id"] for b in result["branches"])
    assert not next(b for b in result["branches"] if b["kind"] == "safety")["output"]["flagged"]
    # blockbuster turns blocking I/O in a node into BlockingError, which a branch would record.
    errors = [b["error"] for b in result["branches"] if b.get("error")]
    assert not [e for e in errors if "Blocking" in e], errors

    # The run is stored with the thread, and the thread's state holds the same output.
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["trace_id"] == result["trace_id"]

    # The trace went to the server's store under the run's tenant, with every lifecycle.
    traces = (await client.store.search_items(["traces", "apitest"], limit=10))["items"]
    assert [t["key"] for t in traces] == [result["trace_id"]]
    stored = traces[0]["value"]
    assert all(
        b["transitions"][0]["state"] == "PENDING" and b["state"] in ("COMPLETED", "ESCALATED")
        for b in stored["branches"]
    )
    assert (await client.store.search_items(["traces", "default"], limit=10))["items"] == []
    print(
        f"API vote run: {elapsed:.1f}s, status={result['status']},"
        f" vote_counts={result['vote_counts']}, answer={result['answer']!r}, branches={kinds},"
        f" errors={errors}"
    )


async def test_the_server_draws_a_runs_timeline_for_its_tenant_only(dev_server):
    import httpx

    client = get_client(url=dev_server.url)
    thread = await client.threads.create()
    result = await client.runs.wait(
        thread["thread_id"],
        "solve",
        input={"task": "What is 3 + 4?", "mode": "vote", "votes": 2, "tenant": "drawn"},
    )
    async with httpx.AsyncClient(base_url=dev_server.url, timeout=30) as http:
        svg = await http.get(f"/timeline/{result['trace_id']}", params={"tenant": "drawn"})
        data = await http.get(
            f"/timeline/{result['trace_id']}", params={"tenant": "drawn", "format": "json"}
        )
        elsewhere = await http.get(f"/timeline/{result['trace_id']}", params={"tenant": "default"})
        bad = await http.get(
            f"/timeline/{result['trace_id']}", params={"tenant": "drawn", "format": "png"}
        )
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert all(b["id"] in svg.text for b in result["branches"])
    lanes = data.json()["lanes"]
    assert sorted(lane["id"] for lane in lanes) == sorted(b["id"] for b in result["branches"])
    assert all(lane["segments"] and lane["end"] in ("completed", "escalated") for lane in lanes)
    assert elsewhere.status_code == 404 and "no trace" in elsewhere.json()["message"]
    assert bad.status_code == 422 and "svg or json" in bad.json()["message"]
