"""The v2 commands that start a run (`run.start`, `input.respond`) pass the checks of a classic run
creation, on the deployed graph API (`parallax serve`, two replicas, PostgreSQL and Redis): a run
that cannot run is refused with the one-line reason and a tenant at PARALLAX_MAX_PENDING is refused
as busy (server/admission.py, server/auth.py), over POST /threads/{id}/commands (langgraph-sdk's
thread stream on either transport, and raw) and on the WebSocket, each in that transport's own error
shape, with nothing stored for a refused command.

Before these, a command with a bad input was stored and ran into an error (the 422 checks never saw
the commands route), and backpressure on the WebSocket was answered "invalid_argument". The scripted
model answers solve runs; the graph `echo` (testkit/protocol_graph.py, no model) sleeps on request,
to keep runs in flight.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import RateLimitError, UnprocessableEntityError

from testkit.aegra_cluster import ROOT, config_with, sql, two_replicas
from testkit.fault_server import default_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "busy": "key-busy"}
MAX_PENDING = 2
GOOD = {"task": "What is 1 + 1?", "mode": "direct"}
BAD = {"task": "What is 1 + 1?", "bogus": 1}
SLEEPER = {"items": [], "sleep_s": 60, "ask": False}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("run-commands")
    config = config_with(work / "config", {"echo": f"{ROOT / 'testkit/protocol_graph.py'}:graph"})
    with two_replicas(work, default_reply, KEYS, MAX_PENDING, config=config) as running:
        yield running


def client(replica, tenant: str = "acme"):
    return get_client(url=replica.url, api_key=KEYS[tenant])


async def post_command(replica, tenant: str, thread_id: str, command: dict) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, timeout=30) as h:
        return await h.post(
            f"{replica.url}/threads/{thread_id}/commands",
            json=command,
            headers={"x-api-key": KEYS[tenant]},
        )


async def socket_command(replica, tenant: str, thread_id: str, command: dict) -> dict:
    """Send one command on the thread's WebSocket; its answer."""
    import websockets

    url = replica.url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    async with websockets.connect(url, additional_headers={"x-api-key": KEYS[tenant]}) as socket:
        await socket.send(json.dumps(command))
        return json.loads(await asyncio.wait_for(socket.recv(), 30))


def run_start(command_id: int, assistant_id: str, run_input: dict, **params) -> dict:
    return {
        "id": command_id,
        "method": "run.start",
        "params": {"assistant_id": assistant_id, "input": run_input, **params},
    }


async def test_a_command_whose_run_cannot_run_is_refused_with_the_reason_and_nothing_is_stored(
    cluster,
):
    a, b = cluster.live()
    # the reason, as a classic run creation gives it (422, Aegra's error body)
    with pytest.raises(UnprocessableEntityError) as classic:
        await client(a).runs.create(None, "solve", input=BAD)
    reason = classic.value.response.json()["message"]
    assert reason.startswith("unknown input field bogus for solve: use ") and "\n" not in reason
    runs_before = sql(cluster, "SELECT count(*) FROM runs WHERE user_id = 'acme'")

    fresh = [
        str(uuid.uuid4()) for _ in range(5)
    ]  # minted here, as the SDK does: Aegra creates them with a run
    # langgraph-sdk's thread stream sends run.start over POST /commands on either transport: its
    # protocol error
    for transport, thread_id in zip(("sse", "websocket"), fresh, strict=False):
        with pytest.raises(RuntimeError) as refused:
            async with client(b).threads.stream(
                thread_id=thread_id,
                assistant_id="solve",
                transport=transport,
                headers={"x-api-key": KEYS["acme"]},
            ) as v2:
                await v2.run.start(input=BAD)
        assert str(refused.value) == f"Protocol error [invalid_argument]: {reason}"
    # the route's own shape: HTTP 200 and the protocol's error envelope, as Aegra answers a
    # command's bad params
    answer = await post_command(a, "acme", fresh[2], run_start(3, "solve", BAD))
    assert answer.status_code == 200
    assert answer.json() == {
        "type": "error",
        "id": 3,
        "error": "invalid_argument",
        "message": reason,
    }
    # bad run settings, on input.respond too (a resume checks its context, as a classic run resumed
    # with a command)
    respond = {
        "id": 4,
        "method": "input.respond",
        "params": {"assistant_id": "solve", "response": "yes", "context": {"max_concurrency": 0}},
    }
    answer = await post_command(b, "acme", fresh[3], respond)
    assert answer.json() == {
        "type": "error",
        "id": 4,
        "error": "invalid_argument",
        "message": "context.max_concurrency must be a whole number from 1 to 1024, got 0",
    }
    # sent on the WebSocket itself: the same envelope
    assert await socket_command(a, "acme", fresh[4], run_start(5, "solve", BAD)) == {
        "type": "error",
        "id": 5,
        "error": "invalid_argument",
        "message": reason,
    }
    # nothing half-written: no run, no thread
    assert sql(cluster, "SELECT count(*) FROM runs WHERE user_id = 'acme'") == runs_before
    assert sql(cluster, "SELECT count(*) FROM thread WHERE thread_id = ANY(%s)", fresh) == [(0,)]

    # the same command with a good input starts its run, on the thread it names
    started = await post_command(a, "acme", fresh[0], run_start(6, "solve", GOOD))
    assert started.json()["type"] == "success", started.json()
    run_id = started.json()["result"]["run_id"]
    await client(b).runs.join(fresh[0], run_id)
    assert (await client(b).runs.get(fresh[0], run_id))["status"] == "success"


async def test_a_tenant_at_its_pending_cap_is_refused_as_busy_over_commands_and_classic_runs_alike(
    cluster,
):
    a, b = cluster.live()
    busy = client(a, "busy")
    # at the cap: one run started the classic way, one by a command (a command's run counts as a
    # classic one)
    classic_thread = (await busy.threads.create())["thread_id"]
    classic_run = await busy.runs.create(classic_thread, "echo", input=SLEEPER)
    command_thread = str(uuid.uuid4())
    started = await post_command(b, "busy", command_thread, run_start(1, "echo", SLEEPER))
    assert started.json()["type"] == "success", started.json()
    sleepers = [
        (classic_thread, classic_run["run_id"]),
        (command_thread, started.json()["result"]["run_id"]),
    ]
    fresh = [str(uuid.uuid4()) for _ in range(6)]

    async def classic(replica) -> object:
        try:
            return await client(replica, "busy").runs.create(None, "echo", input=SLEEPER)
        except RateLimitError as exc:
            return exc.response

    async def sdk_stream(replica, thread_id: str) -> object:
        try:
            async with client(replica, "busy").threads.stream(
                thread_id=thread_id, assistant_id="echo", headers={"x-api-key": KEYS["busy"]}
            ) as v2:
                return await v2.run.start(input=SLEEPER)
        except httpx.HTTPStatusError as exc:
            return exc.response

    respond = {
        "id": 2,
        "method": "input.respond",
        "params": {"assistant_id": "echo", "response": "yes"},
    }
    attempts = await asyncio.gather(
        classic(a),
        classic(b),
        sdk_stream(a, fresh[0]),
        sdk_stream(b, fresh[1]),
        post_command(a, "busy", fresh[2], run_start(2, "echo", SLEEPER)),
        post_command(b, "busy", fresh[3], respond),
        socket_command(a, "busy", fresh[4], run_start(3, "echo", SLEEPER)),
        socket_command(b, "busy", fresh[5], run_start(4, "echo", SLEEPER)),
    )
    *over_http, on_a, on_b = attempts
    why = (
        f"tenant 'busy' has {MAX_PENDING} runs pending or running (most: {MAX_PENDING}): retry"
        " after 1 s"
    )
    for answer in over_http:  # classic and commands alike: 429, Retry-After, Aegra's error body
        assert isinstance(answer, httpx.Response), answer
        assert (answer.status_code, answer.headers["retry-after"]) == (429, "1")
        assert answer.json() == {"error": "too_many_requests", "message": why, "details": None}
    assert (on_a, on_b) == (
        {"type": "error", "id": 3, "error": "unknown_error", "message": why},
        {"type": "error", "id": 4, "error": "unknown_error", "message": why},
    )
    # nothing stored for any of them: the two runs in flight are the tenant's only ones, no thread
    # was made
    assert sql(cluster, "SELECT count(*) FROM runs WHERE user_id = 'busy'") == [(MAX_PENDING,)]
    assert sql(cluster, "SELECT count(*) FROM thread WHERE thread_id = ANY(%s)", fresh) == [(0,)]

    for thread_id, run_id in sleepers:  # once they end, a command starts a run again
        assert (await client(b, "busy").runs.cancel(thread_id, run_id))["status"] == "interrupted"
    again = await socket_command(
        b, "busy", fresh[0], run_start(5, "echo", {"items": [], "ask": False})
    )
    assert again["type"] == "success", again
    await busy.runs.join(fresh[0], again["result"]["run_id"])
    assert (await busy.threads.get_state(fresh[0]))["values"]["items"] == ["worked", "not asked"]
