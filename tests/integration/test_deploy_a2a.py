"""/a2a on the deployed graph API: two `parallax serve` replicas on PostgreSQL and Redis, driven by
the official A2A SDK's client (a2a-sdk), with the scripted fault server as the model.

What an agent calling Parallax over A2A must get: the card with the assistant's skills, a message
answered as a completed task with the answer in its artifact, a streamed message's status updates
before the artifact, a cancelled task whose run is cancelled, 401 without a key, another tenant's
task not found, a bad input refused before anything exists; and each message a run of the deployment
(thread, run and trace under the caller's tenant, readable on the other replica). `-s` prints the
transcript of the first test, to paste. Needs the server venv.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from testkit.aegra_cluster import fill_pending, two_replicas
from testkit.readme_examples import python_block, run_block
from testkit.review_model import review_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta", "busy": "key-busy"}
MAX_PENDING = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(
        tmp_path_factory.mktemp("deploy-a2a"), review_reply, KEYS, MAX_PENDING
    ) as running:
        yield running


def sdk(replica, tenant: str = "acme"):
    from langgraph_sdk import get_client

    return get_client(url=replica.url, api_key=KEYS[tenant])


def http(tenant: str | None = "acme") -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"} if tenant else {}
    return httpx.AsyncClient(headers=headers, timeout=120, trust_env=False)


async def a2a_client(
    replica,
    tenant: str | None = "acme",
    *,
    graph: str = "solve",
    streaming: bool = True,
    polling: bool = False,
):
    from a2a.client import A2ACardResolver, ClientConfig, create_client

    session = http(tenant)
    card = await A2ACardResolver(session, f"{replica.url}/a2a/{graph}").get_agent_card()
    return await create_client(
        card, ClientConfig(httpx_client=session, streaming=streaming, polling=polling)
    )


def message(text: str, **data):
    from a2a.helpers import new_data_part, new_text_message
    from a2a.types import Role, SendMessageRequest

    sent = new_text_message(text, role=Role.ROLE_USER)
    if data:
        sent.parts.append(new_data_part(data))
    return SendMessageRequest(message=sent)


def as_dict(proto) -> dict:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(proto)


class Transcript:
    """What the client sent and got, as JSON, printed at the end (pytest -s) to paste into a
    note."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, title: str, body) -> None:
        self.lines.append(f"### {title}\n{json.dumps(body, indent=1, ensure_ascii=False)}")

    def print(self) -> None:
        print(
            "\n\n".join(
                [
                    "",
                    "===== A2A transcript (a2a-sdk client against parallax serve) =====",
                    *self.lines,
                ]
            )
        )


async def test_card_send_stream_and_cancel_with_the_a2a_sdk_client(cluster):
    from a2a.client import A2ACardResolver
    from a2a.helpers import get_artifact_text, get_data_parts, get_message_text
    from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState

    a, b = cluster.live()
    said = Transcript()
    # the card: public, per assistant, its skills and its endpoint on the address asked
    async with http(None) as anonymous:
        card = await A2ACardResolver(anonymous, f"{a.url}/a2a/solve").get_agent_card()
        plan_card = await A2ACardResolver(anonymous, f"{b.url}/a2a/plan").get_agent_card()
        raw_card = (await anonymous.get(f"{a.url}/a2a/solve/.well-known/agent-card.json")).json()
    said.add(f"GET {a.url}/a2a/solve/.well-known/agent-card.json (no key)", raw_card)
    assert (card.name, [s.id for s in card.skills]) == (
        "parallax-solve",
        ["vote", "extract", "document"],
    )
    assert (plan_card.name, [s.id for s in plan_card.skills]) == ("parallax-plan", ["plan"])
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        (f"{a.url}/a2a/solve", "JSONRPC", "1.0"),
        (f"{a.url}/a2a/solve", "JSONRPC", "0.3"),
    ]
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert sorted(card.security_schemes) == ["apiKey", "bearer"]

    # SendMessage (message/send): the task comes back completed, the answer in its artifact
    client = await a2a_client(a, streaming=False)
    [reply] = [
        event
        async for event in client.send_message(message("What is 2 + 2?", mode="vote", votes=3))
    ]
    task = reply.task
    said.add("SendMessage 'What is 2 + 2?' + data {mode: vote, votes: 3} -> task", as_dict(task))
    assert TaskState.Name(task.status.state) == "TASK_STATE_COMPLETED"
    [artifact] = task.artifacts
    [facts] = get_data_parts(artifact.parts)
    assert (artifact.name, get_artifact_text(artifact)) == ("answer", "4")
    assert (facts["status"], facts["vote_counts"], facts["mode"]) == ("ok", {"4": 3}, "vote"), facts
    # a run of the deployment: its thread, run and trace are acme's, read on the other replica
    run = await sdk(b).runs.get(facts["thread_id"], facts["run_id"])
    assert run["status"] == "success"
    thread = await sdk(b).threads.get(facts["thread_id"])
    assert (thread["metadata"]["face"], thread["metadata"]["a2a_task_id"]) == ("a2a", task.id)
    traces = await sdk(b).store.search_items(["traces"], limit=50)
    assert facts["trace_id"] in {item["key"] for item in traces["items"]}
    # GetTask on the other replica: the same task; another tenant's key: not found
    again = await (await a2a_client(b, streaming=False)).get_task(GetTaskRequest(id=task.id))
    assert (again.id, TaskState.Name(again.status.state)) == (task.id, "TASK_STATE_COMPLETED")
    from a2a.utils.errors import TaskNotFoundError

    with pytest.raises(TaskNotFoundError):
        await (await a2a_client(b, "beta", streaming=False)).get_task(GetTaskRequest(id=task.id))
    said.add(
        "GetTask of that task with beta's key",
        {"error": "TaskNotFoundError (-32001): task not found"},
    )

    # SendStreamingMessage (message/stream): the task, working updates (run, branches, merge), the
    # artifact, completed
    events = [
        event
        async for event in (await a2a_client(b)).send_message(
            message("What is 2 + 2?", mode="vote", votes=3)
        )
    ]
    said.add(
        "SendStreamingMessage 'What is 2 + 2?' -> events", [as_dict(event) for event in events]
    )
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task" and kinds[-2:] == ["artifact_update", "status_update"], kinds
    updates = [event.status_update.status for event in events if event.HasField("status_update")]
    assert [TaskState.Name(s.state) for s in updates[:-1]] == ["TASK_STATE_WORKING"] * (
        len(updates) - 1
    )
    assert TaskState.Name(updates[-1].state) == "TASK_STATE_COMPLETED"
    lines = [get_message_text(s.message) for s in updates[:-1]]
    assert lines[0].startswith("solve run ") and " started on thread " in lines[0], lines
    assert sum(line.startswith("vote branch") for line in lines) == 3 and "merged: ok" in lines, (
        lines
    )
    assert kinds.index("artifact_update") > max(
        i
        for i, k in enumerate(kinds)
        if k == "status_update"
        and TaskState.Name(events[i].status_update.status.state) == "TASK_STATE_WORKING"
    )
    assert get_artifact_text(events[-2].artifact_update.artifact) == "4"

    # CancelTask: the task canceled, its run cancelled (the model made slow so that it is still
    # running)
    cluster.set_model(latency_ms=4000)
    try:
        polling = await a2a_client(a, streaming=False, polling=True)
        [started] = [
            event
            async for event in polling.send_message(message("What is 2 + 2?", mode="vote", votes=3))
        ]
        task_id = started.task.id
        thread_id, run_id = await started_run(b, task_id)
        canceled = await (await a2a_client(b, streaming=False)).cancel_task(
            CancelTaskRequest(id=task_id)
        )
        said.add(
            f"CancelTask {task_id} (on the other replica, while its run works)", as_dict(canceled)
        )
        assert TaskState.Name(canceled.status.state) == "TASK_STATE_CANCELED"
        await sdk(a).runs.join(thread_id, run_id)
        ended = await sdk(a).runs.get(thread_id, run_id)
        assert ended["status"] == "interrupted", ended
        later = await polling.get_task(GetTaskRequest(id=task_id))
        assert TaskState.Name(later.status.state) == "TASK_STATE_CANCELED"
        said.add(
            "the run of the canceled task (langgraph-sdk runs.get)",
            {"run_id": run_id, "status": ended["status"]},
        )
    finally:
        cluster.set_model(latency_ms=20)
    said.print()


async def started_run(replica, task_id: str) -> tuple[str, str]:
    """(thread id, run id) of the A2A task's run, once it exists."""
    client = sdk(replica)
    for _ in range(100):
        threads = await client.threads.search(metadata={"a2a_task_id": task_id}, limit=2)
        if threads:
            runs = await client.runs.list(threads[0]["thread_id"])
            if runs and runs[0]["status"] == "running":
                return threads[0]["thread_id"], runs[0]["run_id"]
        await asyncio.sleep(0.2)
    raise AssertionError(f"task {task_id} started no run")


async def test_refusals_come_before_any_task_or_thread(cluster):
    from a2a.client import A2AClientError
    from a2a.types import InvalidParamsError

    a, b = cluster.live()
    threads_before = len(await sdk(a).threads.search(limit=100))
    # no key: 401 on the JSON-RPC endpoint, a JSON-RPC error body; the SDK client raises it
    anonymous = await a2a_client(a, None, streaming=False)
    with pytest.raises(A2AClientError, match="HTTP Error 401"):
        [event async for event in anonymous.send_message(message("What is 2 + 2?"))]
    async with http(None) as raw:
        refused = await raw.post(
            f"{a.url}/a2a/solve",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}},
        )
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert (
            refused.json()["error"]["code"] == -32600
            and "API key" in refused.json()["error"]["message"]
        )
    # a bad input: invalid params naming the field and its bounds
    with pytest.raises(InvalidParamsError, match="votes must be a whole number from 1 to"):
        [
            event
            async for event in (await a2a_client(b)).send_message(
                message("What is 2 + 2?", votes=0)
            )
        ]
    with pytest.raises(InvalidParamsError, match="file parts are not read"):
        from a2a.types import Part

        bad = message("What is in this file?")
        bad.message.parts.append(Part(url="https://example.com/report.pdf"))
        [event async for event in (await a2a_client(b, streaming=False)).send_message(bad)]
    # an unknown assistant: 404 naming the served ones
    async with http() as keyed:
        unknown = await keyed.post(
            f"{a.url}/a2a/chat",
            json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "x"}},
        )
    assert (
        unknown.status_code == 404 and "/a2a/solve, /a2a/plan" in unknown.json()["error"]["message"]
    )
    # a body over PARALLAX_MAX_BODY_BYTES: 413 before it is read
    async with http() as keyed:
        huge = await keyed.post(
            f"{a.url}/a2a/solve",
            content=b"{" + b" " * (5 * 1024 * 1024) + b"}",
            headers={"content-type": "application/json"},
        )
    assert huge.status_code == 413 and "error" in huge.json(), huge.text[:300]
    assert len(await sdk(a).threads.search(limit=100)) == threads_before


async def test_a_tenant_at_its_pending_runs_limit_is_429_with_retry_after(cluster):
    a, b = cluster.live()
    cluster.set_model(latency_ms=1500)
    try:
        busy = sdk(a, "busy")
        started = await fill_pending(busy, MAX_PENDING)
        async with http("busy") as keyed:
            refused = await keyed.post(
                f"{b.url}/a2a/solve",
                json={
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "message/send",
                    "params": {
                        "message": {
                            "kind": "message",
                            "role": "user",
                            "messageId": "m-7",
                            "parts": [{"kind": "text", "text": "What is 2 + 2?"}],
                        }
                    },
                },
            )
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1", refused.text
        assert (
            refused.json()["id"] == 7
            and "runs pending or running" in refused.json()["error"]["message"]
        )
        for thread_id, run_id in started:
            await busy.runs.join(thread_id, run_id)
    finally:
        cluster.set_model(latency_ms=20)


async def test_the_0_3_method_names_and_the_plan_assistant(cluster):
    a, b = cluster.live()
    async with http() as keyed:
        sent = await keyed.post(
            f"{a.url}/a2a/plan",
            json={
                "jsonrpc": "2.0",
                "id": "p1",
                "method": "message/send",
                "params": {
                    "message": {
                        "kind": "message",
                        "role": "user",
                        "messageId": "m-1",
                        "parts": [
                            {
                                "kind": "text",
                                "text": "Compute 2 + 2, then write a one-line note about it.",
                            }
                        ],
                    }
                },
            },
        )
        task = sent.json()["result"]
        assert (task["kind"], task["status"]["state"]) == ("task", "completed"), task
        facts = next(p["data"] for p in task["artifacts"][0]["parts"] if p["kind"] == "data")
        assert facts["mode"] == "plan" and facts["status"] in ("ok", "needs_review"), facts
        got = await keyed.post(
            f"{b.url}/a2a/plan",
            json={
                "jsonrpc": "2.0",
                "id": "p2",
                "method": "tasks/get",
                "params": {"id": task["id"]},
            },
        )
        assert got.json()["result"]["status"]["state"] == "completed"
    async with http("beta") as other:
        hidden = await other.post(
            f"{b.url}/a2a/plan",
            json={
                "jsonrpc": "2.0",
                "id": "p3",
                "method": "tasks/get",
                "params": {"id": task["id"]},
            },
        )
    assert hidden.json()["error"]["code"] == -32001


def test_the_docs_client_example_runs_as_written(cluster):
    a, _ = cluster.live()
    block = python_block("A2ACardResolver(http, agent_url)", "docs/a2a.md").replace(
        "http://127.0.0.1:2026", a.url
    )
    out = run_block(block).strip().splitlines()
    assert out[0] == "parallax-solve ['vote', 'extract', 'document']", out
    assert out[1].startswith("TASK_STATE_WORKING solve run "), out
    assert out[-2:] == ["TASK_STATE_COMPLETED ", "answer: 4"], out
