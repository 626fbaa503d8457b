"""`parallax serve`'s runs as OpenTelemetry spans in a real backend (Arize Phoenix, started by the
test): a client's W3C `traceparent` on the create-run request makes the run a child of the client's
span, whichever of two replicas runs it, and the spans are the stored trace's (ids, parents, counts,
statuses). Needs the server venv and Phoenix (testkit/phoenix.py); `.ci/run` runs it with `-m
deploy`."""

from __future__ import annotations

import secrets

import pytest

from testkit.aegra_cluster import two_replicas
from testkit.phoenix import check_tree, phoenix_server, reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme"}


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    with phoenix_server(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(phoenix, tmp_path_factory):
    with two_replicas(
        tmp_path_factory.mktemp("deploy-otel"), reply, KEYS, 8, extra_env=phoenix.otlp_env
    ) as running:
        yield running


@pytest.mark.parametrize("mode", ["vote", "plan"])
async def test_a_served_runs_spans_join_the_clients_trace(mode, cluster, phoenix):
    from langgraph_sdk import get_client

    a, b = cluster.replicas[:2]
    caller_trace, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    client = get_client(url=a.url, api_key=KEYS["acme"])
    thread = await client.threads.create()
    task = "What is 6 * 7?" if mode == "vote" else "List the vendors, then total the invoices."
    graph = "plan" if mode == "plan" else "solve"
    out = await client.runs.wait(
        thread["thread_id"],
        graph,
        input={"task": task, "mode": mode, "votes": 3},
        headers={"traceparent": f"00-{caller_trace}-{caller_span}-01"},
    )
    item = await get_client(url=b.url, api_key=KEYS["acme"]).store.get_item(
        ["traces", "acme"], out["trace_id"]
    )
    trace = {**item["value"], "trace_id": out["trace_id"]}
    compared = check_tree(
        phoenix, {**trace, "trace_id": caller_trace}, root_parent=caller_span
    )  # waits for them all
    (root,) = [s for s in phoenix.spans(caller_trace) if s["name"].startswith("parallax.run")]
    assert root["attributes"]["parallax.trace_id"] == out["trace_id"]
    print("phoenix", {"face": "parallax serve", **compared, "joined_the_callers_trace": True})


def test_an_openai_face_request_with_traceparent_joins_the_callers_trace(cluster, phoenix):
    from openai import OpenAI

    caller_trace, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    client = OpenAI(base_url=f"{cluster.replicas[1].url}/v1", api_key=KEYS["acme"], max_retries=0)
    reply = client.chat.completions.create(
        model="parallax-vote",
        messages=[{"role": "user", "content": "What is 6 * 7?"}],
        extra_body={"parallax": {"votes": 3}},
        extra_headers={"traceparent": f"00-{caller_trace}-{caller_span}-01"},
    )
    trace_id = reply.parallax["trace_id"]
    spans = phoenix.spans(
        caller_trace, want=8
    )  # the run, safety, 3 votes and their calls, in one batch
    roots = [s for s in spans if s["name"].startswith("parallax.run")]
    assert len(roots) == 1 and roots[0]["parent_id"] == caller_span
    assert roots[0]["attributes"]["parallax.trace_id"] == trace_id
