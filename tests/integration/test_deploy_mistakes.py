"""A client's mistake is a client error on every face of `parallax serve` (two replicas, PostgreSQL,
Redis).

Each mistake of testkit/client_mistakes.py is made with the face's official client: the
error comes back at once in the face's own shape (OpenAI's error JSON on /v1, a tool result with
isError on /mcp, the Agent Protocol's error body with 422 on the graph API), naming the field at
fault; no run is created, no thread is left behind, and the client sent exactly one request (the
openai SDK retries a 5xx twice: one request means it got a 4xx). Needs the server venv (`.ci/run`
runs it with `-m deploy`; a skip fails in CI).
"""

from __future__ import annotations

import pytest

from testkit import client_mistakes as cm
from testkit import openai_checks
from testkit.aegra_cluster import two_replicas

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {cm.TENANT: cm.KEY, cm.OTHER_TENANT: cm.OTHER_KEY}

EXPECTED = {
    # mistake: (status, shape, the field the error names)
    "unknown playbook (extra_body parallax.playbook)": (400, cm.OPENAI_SHAPE, "parallax.playbook"),
    "unknown playbook, streaming": (400, cm.OPENAI_SHAPE, "parallax.playbook"),
    "context max_concurrency -3": (400, cm.OPENAI_SHAPE, "parallax.context.max_concurrency"),
    "votes 0": (400, cm.OPENAI_SHAPE, "parallax.votes"),
    "unknown parallax option (votez)": (400, cm.OPENAI_SHAPE, "parallax.votez"),
    "unknown top-level field (frobnicate)": (400, cm.OPENAI_SHAPE, "frobnicate"),
    "no model": (400, cm.OPENAI_SHAPE, "model"),
    "unknown model": (404, cm.OPENAI_SHAPE, "model"),
    "response_format schema not an object": (400, cm.OPENAI_SHAPE, "response_format"),
    "n = 2": (400, cm.OPENAI_SHAPE, "n"),
    "POST /v1/embeddings": (404, cm.OPENAI_SHAPE, "None"),
    "POST /v1/responses": (404, cm.OPENAI_SHAPE, "None"),
    "POST /v1/completions": (404, cm.OPENAI_SHAPE, "None"),
    "unknown API key": (401, cm.OPENAI_SHAPE, "None"),
    "solve votes -1": (200, cm.MCP_SHAPE, "votes"),
    "solve output_schema not an object": (200, cm.MCP_SHAPE, "output_schema"),
    "solve unknown argument (vote)": (200, cm.MCP_SHAPE, "vote"),
    "solve unknown playbook": (200, cm.MCP_SHAPE, "playbook"),
    "runs.wait votes -1 (stateless)": (422, cm.GRAPH_SHAPE, "votes"),
    "runs.create context max_concurrency -3": (422, cm.GRAPH_SHAPE, "context.max_concurrency"),
    "runs.stream unknown input field (vote)": (422, cm.GRAPH_SHAPE, "vote"),
    "runs.wait unknown playbook": (422, cm.GRAPH_SHAPE, "playbook"),
    "runs.wait plan with an output schema": (422, cm.GRAPH_SHAPE, "output_schema"),
    "runs.list on another tenant's thread": (404, cm.GRAPH_SHAPE, ""),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(
        tmp_path_factory.mktemp("deploy-mistakes"), openai_checks.reply, KEYS, 8
    ) as running:
        yield running


async def other_tenants_thread(replica) -> str:
    from langgraph_sdk import get_client

    return str(
        (await get_client(url=replica.url, api_key=cm.OTHER_KEY).threads.create())["thread_id"]
    )


async def test_every_mistake_is_a_client_error_in_the_faces_shape_with_no_run_and_no_retry(cluster):
    a, b = cluster.live()
    rows = await cm.make_mistakes(a.url, cluster.database_url, lambda: other_tenants_thread(b))
    print(cm.as_json(rows))
    assert {r.mistake for r in rows} == set(EXPECTED)
    for r in rows:
        status, shape, where = EXPECTED[r.mistake]
        assert (r.status, r.shape, r.where) == (status, shape, where), r
        assert (r.runs_created, r.threads_left, r.requests_sent) == (0, 0, 1), r
        assert "Traceback" not in r.message and "execution failed" not in r.message, r
    reasons = {r.mistake: r.message for r in rows}
    assert "unknown playbook 'nope'" in reasons["unknown playbook (extra_body parallax.playbook)"]
    assert "must be a whole number from 1 to 1024, got -3" in reasons["context max_concurrency -3"]
    assert (
        "x-api-key" in reasons["unknown API key"]
        and "Authorization: Bearer" in reasons["unknown API key"]
    )
    assert "does not serve embeddings" in reasons["POST /v1/embeddings"]


async def test_a_good_request_after_the_mistakes_still_runs(cluster):
    """The checks refuse mistakes, not runs: the same faces' correct requests run (a follow-up run
    on a thread may leave the task out, the thread holds it)."""
    from langgraph_sdk import get_client

    a, b = cluster.live()
    client = get_client(url=a.url, api_key=cm.KEY)
    thread = await client.threads.create()
    first = await client.runs.wait(
        thread["thread_id"],
        "solve",
        input={"task": "What is 6 * 7?", "mode": "vote", "votes": 3},
        context={"max_concurrency": 2},
    )
    again = await get_client(url=b.url, api_key=cm.KEY).runs.wait(
        thread["thread_id"], "solve", input={"votes": 3}
    )
    assert first["answer"] == again["answer"] == "42", (first, again)
