"""The front door of `parallax serve`, attacked with one tenant's key (two replicas, PostgreSQL,
Redis).

Each attack of issue 37 that admission answers (server/admission.py) is sent as an attacker would,
with raw HTTP (httpx), langgraph-sdk and a WebSocket, and each test checks both halves: the request
is refused with the right status and a message that says why, and nothing happened (no file made
by a shell command, no trace under the other tenant, no store record, no run, the replica's memory
not grown by what was sent). The model is the fault server with the chat review script
(testkit/review_model.py), so a chat question containing "unsure" ends in a review interrupt.

With PARALLAX_ATTACK_TABLE set to a file, each attempt is appended to it as a JSON line
(request, expected, got): the table of the change's notes.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from testkit.aegra_cluster import METRICS_KEY, sql, two_replicas
from testkit.review_model import review_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta"}
ENV = {"PARALLAX_DAILY_BUDGETS": "*:100000000tokens", "PARALLAX_MAX_BODY_BYTES": str(1024 * 1024)}
CAP = 1024 * 1024
DIRECT = {"task": "What is 2 + 2?", "mode": "direct"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(tmp_path_factory.mktemp("admission"), review_reply, KEYS, 20, ENV) as running:
        yield running


def client(replica, tenant: str = "acme"):
    return get_client(url=replica.url, api_key=KEYS[tenant])


def key(tenant: str = "acme") -> dict[str, str]:
    return {"x-api-key": KEYS[tenant]}


def record(request: str, expected: str, got: str) -> None:
    table = os.environ.get("PARALLAX_ATTACK_TABLE")
    if table:
        with open(table, "a") as out:
            out.write(json.dumps({"request": request, "expected": expected, "got": got}) + "\n")


def refused(
    answer: httpx.Response, status: int, field: str | None, says: str, request: str
) -> None:
    """`answer` is the refusal: its status, Aegra's error body naming `field`, a message containing
    `says`."""
    body = answer.json()
    record(
        request,
        f"{status} {field or ''}".strip(),
        f"{answer.status_code} {body.get('message', body)}"[:160],
    )
    assert answer.status_code == status, body
    assert says in body["message"], body
    if field is not None:
        assert (body.get("details") or {}).get("field") == field, body


def candidate_task(marker: Path, tenant: str = "acme") -> dict:
    """The payload of a `Send("candidate", ...)` whose check command creates `marker`
    (state/records.py CandidateTask)."""
    trace_id = uuid.uuid4().hex
    return {
        "fan_out": f"attack-{trace_id}",
        "candidate": {
            "id": "c1",
            "parent_id": trace_id,
            "planned_at": time.time(),
            "index": 0,
            "text": "x",
            "question": "x",
            "playbook": [],
            "model": "",
            "temperature": 0.2,
            "approach": "plain",
            "hint": "",
        },
        "check": {"command": f"touch {marker}", "file": "answer.txt", "repo": "", "timeout_s": 20},
        "tenant": tenant,
        "prompts": {},
        "meta": {
            "parallax_trace_id": trace_id,
            "tenant": tenant,
            "playbook": "default",
            "playbook_version": 0,
            "playbook_arm": "head",
            "prompt_versions": {},
        },
    }


def forged_trace(trace_id: str) -> dict:
    """A solve state for `record_trace` that names the other tenant."""
    return {
        "trace_id": trace_id,
        "tenant": "beta",
        "task": "forged lesson",
        "question": "",
        "mode": "direct",
        "status": "ok",
        "answer": "forged",
        "branches": [],
        "started_at": time.time(),
    }


def beta_has_trace(cluster, trace_id: str) -> bool:
    return bool(
        sql(cluster, "SELECT 1 FROM store WHERE prefix LIKE 'traces.beta%%' AND key = %s", trace_id)
    )


async def solved_thread(replica) -> str:
    thread = await client(replica).threads.create()
    done = await client(replica).runs.wait(thread["thread_id"], "solve", input=DIRECT)
    assert done["status"] == "ok", done
    return str(thread["thread_id"])


def runs_of(cluster, thread_id: str) -> int:
    return int(sql(cluster, "SELECT count(*) FROM runs WHERE thread_id = %s", thread_id)[0][0])


async def test_a_command_goto_to_the_candidate_node_runs_no_shell_command(cluster, tmp_path):
    """Issue 37's first attack: a run's command.goto sends a CandidateTask with a check command to
    the candidate node. On every run route it is refused by name, and the command never runs."""
    a, b = cluster.live()
    thread_id = await solved_thread(a)
    before = runs_of(cluster, thread_id)
    routes = [
        f"/threads/{thread_id}/runs/wait",
        f"/threads/{thread_id}/runs/stream",
        f"/threads/{thread_id}/runs",
        "/runs/wait",
    ]
    markers, answers = [], []
    async with httpx.AsyncClient(timeout=60) as h:
        for n, route in enumerate(routes):
            marker = tmp_path / f"touched-{n}"
            markers.append(marker)
            body = {
                "assistant_id": "solve",
                "command": {"goto": {"node": "candidate", "input": candidate_task(marker)}},
            }
            answers.append(
                (route, await h.post(f"{(a, b)[n % 2].url}{route}", json=body, headers=key()))
            )
    await asyncio.sleep(3)  # a run that had been accepted would have checked its candidate by now
    assert [m.name for m in markers if m.exists()] == [], "the check command ran on the server"
    for route, answer in answers:
        refused(
            answer,
            422,
            "command.goto",
            "command.goto is refused",
            f"POST {route} command.goto candidate (check.command touch FILE)",
        )
    assert runs_of(cluster, thread_id) == before


async def test_no_trace_is_forged_into_another_tenant_by_goto_update_or_a_state_write(cluster):
    a, b = cluster.live()
    thread_id = await solved_thread(a)
    forged = [uuid.uuid4().hex for _ in range(3)]
    async with httpx.AsyncClient(base_url=a.url, timeout=60) as h:
        goto = {
            "assistant_id": "solve",
            "command": {"goto": {"node": "record_trace", "input": forged_trace(forged[0])}},
        }
        refused(
            await h.post(f"/threads/{thread_id}/runs/wait", json=goto, headers=key()),
            422,
            "command.goto",
            "command.goto is refused",
            "POST /threads/{id}/runs/wait command.goto record_trace tenant beta",
        )
        update = {
            "assistant_id": "solve",
            "command": {"update": forged_trace(forged[1]), "goto": "record_trace"},
        }
        refused(
            await h.post(f"/threads/{thread_id}/runs/wait", json=update, headers=key()),
            422,
            "command.goto",
            "is refused",
            "POST /threads/{id}/runs/wait command.update + goto record_trace",
        )
        only_update = {"assistant_id": "solve", "command": {"update": forged_trace(forged[1])}}
        refused(
            await h.post(f"/threads/{thread_id}/runs/wait", json=only_update, headers=key()),
            422,
            "command.update",
            "command.update is refused",
            "POST /threads/{id}/runs/wait command.update",
        )
        state = {"values": forged_trace(forged[2]), "as_node": "judge"}
        refused(
            await h.post(f"/threads/{thread_id}/state", json=state, headers=key()),
            422,
            "values",
            "values is refused",
            "POST /threads/{id}/state values + as_node judge",
        )
        refused(
            await h.post(f"/threads/{thread_id}/state", json={"as_node": "judge"}, headers=key()),
            422,
            "as_node",
            "as_node is refused",
            "POST /threads/{id}/state as_node judge (no values)",
        )
        # what the state write would have made: a run from a checkpoint that is not the thread's own
        refused(
            await h.post(
                f"/threads/{thread_id}/runs/wait",
                headers=key(),
                json={"assistant_id": "solve", "checkpoint_id": str(uuid.uuid4())},
            ),
            404,
            "checkpoint_id",
            "is not one of thread",
            "POST /threads/{id}/runs/wait checkpoint_id not the thread's",
        )
        # the v2 commands: input.respond's goto and update, over HTTP and on the WebSocket
        respond = {
            "id": 7,
            "method": "input.respond",
            "params": {
                "response": "yes",
                "goto": {"node": "record_trace", "input": forged_trace(forged[0])},
            },
        }
        answer = await h.post(f"/threads/{thread_id}/commands", json=respond, headers=key())
        record(
            "POST /threads/{id}/commands input.respond goto record_trace",
            "protocol error invalid_argument",
            str(answer.json()),
        )
        assert answer.status_code == 200 and answer.json()["error"] == "invalid_argument"
        assert answer.json()["message"].startswith("command.goto is refused")
    import websockets

    url = b.url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    async with websockets.connect(url, additional_headers=key()) as socket:
        await socket.send(
            json.dumps(
                {**respond, "params": {"response": "yes", "update": forged_trace(forged[1])}}
            )
        )
        answer = json.loads(await asyncio.wait_for(socket.recv(), 30))
    record("WS input.respond update", "protocol error invalid_argument", str(answer))
    assert (answer["type"], answer["error"]) == ("error", "invalid_argument")
    assert answer["message"].startswith("command.update is refused")
    await asyncio.sleep(2)
    assert [beta_has_trace(cluster, t) for t in forged] == [False, False, False]
    # a fork of the thread's own checkpoint still works (Studio's "re-run from here"), and so does a
    # plain read
    async with httpx.AsyncClient(base_url=a.url, timeout=60) as h:
        state = (await h.get(f"/threads/{thread_id}/state", headers=key())).json()
        fork = await h.post(
            f"/threads/{thread_id}/state",
            headers=key(),
            json={"as_node": "__copy__", "checkpoint_id": state["checkpoint"]["checkpoint_id"]},
        )
        assert fork.status_code == 200, fork.text
        assert (
            await h.post(f"/threads/{thread_id}/state", json={}, headers=key())
        ).status_code == 200


async def test_config_and_metadata_that_would_pose_as_the_server_are_refused_by_name(cluster):
    a, _ = cluster.live()
    thread_id = await solved_thread(a)
    other = await solved_thread(a)
    beta_thread = (await client(a, "beta").threads.create())["thread_id"]
    beta_checkpoint = None
    attempts = [
        (
            {
                "config": {
                    "configurable": {
                        "langgraph_auth_user": {"identity": "beta", "parallax_tenant": "beta"}
                    }
                }
            },
            "config.configurable.langgraph_auth_user",
            "is set by the server",
        ),
        (
            {"config": {"configurable": {"user_id": "beta"}}},
            "config.configurable.user_id",
            "is set by the server",
        ),
        (
            {"config": {"configurable": {"parallax_fence": {}}}},
            "config.configurable.parallax_fence",
            "Parallax's own",
        ),
        (
            {"config": {"configurable": {"checkpoint_ns": "x"}}},
            "config.configurable.checkpoint_ns",
            "LangGraph's own",
        ),
        (
            {"config": {"configurable": {"thread_id": beta_thread}}},
            "config.configurable.thread_id",
            "thread of the route",
        ),
        ({"config": {"run_id": str(uuid.uuid4())}}, "config.run_id", "is not accepted"),
        ({"config": {"callbacks": []}}, "config.callbacks", "is not accepted"),
        ({"config": {"recursion_limit": 10**9}}, "config.recursion_limit", "from 1 to"),
        (
            {"config": {"configurable": {"max_tokens": 0}}},
            "config.configurable.max_tokens",
            "from 1 to",
        ),
        ({"metadata": {"parallax_webhook": "x"}}, "metadata.parallax_webhook", "Parallax's own"),
        ({"metadata": {f"k{i}": i for i in range(40)}}, "metadata", "at most 32"),
        (
            {"checkpoint": {"checkpoint_id": str(uuid.uuid4()), "checkpoint_map": {}}},
            "checkpoint.checkpoint_map",
            "is not accepted",
        ),
        (
            {"checkpoint": {"checkpoint_id": str(uuid.uuid4()), "thread_id": other}},
            "checkpoint.thread_id",
            "thread of the route",
        ),
        ({"interrupt_before": ["x"] * 100}, "interrupt_before", "at most"),
        ({"input": None}, "input", "a run needs input"),
        ({"command": {"resume": "yes"}}, "command", "exclusive"),
    ]
    async with httpx.AsyncClient(base_url=a.url, timeout=60) as h:
        before = runs_of(cluster, thread_id)
        for extra, field, says in attempts:
            body = {"assistant_id": "solve", "input": DIRECT, **extra}
            refused(
                await h.post(f"/threads/{thread_id}/runs/wait", json=body, headers=key()),
                422,
                field,
                says,
                f"POST /threads/{{id}}/runs/wait {json.dumps(extra)[:90]}",
            )
        assert runs_of(cluster, thread_id) == before
        # a checkpoint of another tenant's thread is not one of this thread's
        await client(a, "beta").runs.wait(beta_thread, "solve", input=DIRECT)
        beta_checkpoint = (await client(a, "beta").threads.get_state(beta_thread))["checkpoint"][
            "checkpoint_id"
        ]
        refused(
            await h.post(
                f"/threads/{thread_id}/runs/wait",
                headers=key(),
                json={"assistant_id": "solve", "checkpoint_id": beta_checkpoint},
            ),
            404,
            "checkpoint_id",
            "is not one of thread",
            "POST runs/wait checkpoint_id of beta's thread",
        )
        # and another tenant's thread is not found at all, whatever the run asks
        refused(
            await h.post(
                f"/threads/{beta_thread}/runs/wait",
                json={"assistant_id": "solve", "input": DIRECT},
                headers=key(),
            ),
            404,
            None,
            "not found",
            "POST beta's thread runs/wait with acme's key",
        )
        # a custom assistant cannot carry what a run may not: its config and context are checked as
        # a run's
        refused(
            await h.post(
                "/assistants",
                headers=key(),
                json={"graph_id": "learn", "context": {"max_tokens": 0}},
            ),
            422,
            "context.max_tokens",
            "from 1 to",
            "POST /assistants context max_tokens 0",
        )
        refused(
            await h.post(
                "/assistants",
                headers=key(),
                json={"graph_id": "solve", "config": {"configurable": {"user_id": "beta"}}},
            ),
            422,
            "config.configurable.user_id",
            "set by the server",
            "POST /assistants configurable user_id",
        )
        refused(
            await h.patch(
                f"/threads/{thread_id}", headers=key(), json={"metadata": {"owner": "beta"}}
            ),
            422,
            "metadata.owner",
            "set from your API key",
            "PATCH /threads/{id} metadata owner beta",
        )
    assert beta_checkpoint


async def test_a_resume_answers_only_what_the_interrupt_asked(cluster):
    a, b = cluster.live()
    async with httpx.AsyncClient(timeout=60) as h:
        # a graph that never interrupts takes no answer
        solved = await solved_thread(a)
        refused(
            await h.post(
                f"{a.url}/threads/{solved}/runs/wait",
                headers=key(),
                json={"assistant_id": "solve", "command": {"resume": "yes"}},
            ),
            422,
            "command.resume",
            "never asks for an answer",
            "resume a solve thread",
        )
        # a chat review: the answer must be a review decision, bounded
        thread = await client(a).threads.create()
        asked = await client(a).runs.wait(
            thread["thread_id"],
            "chat",
            input={"messages": [{"type": "human", "content": "How many moons? I am unsure."}]},
        )
        assert asked.get("__interrupt__"), asked
        route = f"{b.url}/threads/{thread['thread_id']}/runs/wait"
        refused(
            await h.post(
                route,
                headers=key(),
                json={
                    "assistant_id": "chat",
                    "command": {"resume": {"decisions": [{"type": "execute_shell"}]}},
                },
            ),
            422,
            "command.resume",
            "does not fit the review",
            "resume a chat review with an unknown decision",
        )
        refused(
            await h.post(
                route,
                headers=key(),
                json={"assistant_id": "chat", "command": {"resume": "x" * 30_000}},
            ),
            422,
            "command.resume",
            "over 20000 bytes",
            "resume a chat review with 30 kB",
        )
        edit = {
            "decisions": [
                {"type": "edit", "edited_action": {"name": "answer", "args": {"answer": "95"}}}
            ]
        }
        done = await client(b).runs.wait(thread["thread_id"], "chat", command={"resume": edit})
        assert done["messages"][-1]["content"] == "95"
        # answered: the thread waits for nothing now
        refused(
            await h.post(
                route, headers=key(), json={"assistant_id": "chat", "command": {"resume": edit}}
            ),
            409,
            "command.resume",
            "is not waiting for an answer",
            "resume a chat review already answered",
        )


async def test_without_a_key_the_body_is_never_read_and_memory_does_not_grow(cluster):
    """A 20 MB body with no key is answered 401 before it is read: a handful of them leave the
    replica's RSS far below what was sent (before the change each one cost +100-150 MB while it was
    read and parsed).
    """
    import psutil

    a, _ = cluster.live()
    process = psutil.Process(a.pid)
    body = b'{"assistant_id": "solve", "input": {"task": "' + b"x" * (20 * 1024 * 1024) + b'"}}'
    statuses = []
    before = process.memory_info().rss
    peak = before
    async with httpx.AsyncClient(timeout=60) as h:
        for _ in range(5):
            try:
                answer = await h.post(
                    f"{a.url}/runs/wait", content=body, headers={"content-type": "application/json"}
                )
                statuses.append(answer.status_code)
                assert answer.json()["error"] == "unauthorized"
            except (httpx.WriteError, httpx.ReadError, httpx.RemoteProtocolError):
                statuses.append(
                    "closed while sending"
                )  # answered before the body was taken: acceptable
            peak = max(peak, process.memory_info().rss)
    record(
        "5 x POST /runs/wait 20 MB, no key",
        "401, RSS growth << 100 MB",
        f"{statuses}, RSS +{(peak - before) / 2**20:.1f} MB",
    )
    assert 401 in statuses
    assert peak - before < 30 * 2**20, (
        f"RSS grew {(peak - before) / 2**20:.1f} MB for {5 * len(body) / 2**20:.0f} MB sent"
    )


async def test_a_body_over_the_cap_is_413_and_deep_json_is_422(cluster):
    a, _ = cluster.live()
    big = {"assistant_id": "solve", "input": {**DIRECT, "task": "x" * (CAP + 10)}}
    async with httpx.AsyncClient(base_url=a.url, timeout=60) as h:
        refused(
            await h.post("/runs/wait", json=big, headers=key()),
            413,
            None,
            "PARALLAX_MAX_BODY_BYTES",
            "POST /runs/wait 1 MiB + 10 (Content-Length)",
        )

        async def chunks():  # no Content-Length: the streamed count stops it
            for _ in range(8):
                yield b" " * (CAP // 4)

        refused(
            await h.post(
                "/runs/wait",
                content=chunks(),
                headers={**key(), "content-type": "application/json"},
            ),
            413,
            None,
            "PARALLAX_MAX_BODY_BYTES",
            "POST /runs/wait chunked 2 MiB",
        )
        deep = "[" * 5000 + "]" * 5000
        for route in ("/runs/wait", "/store/items/search", "/threads/search"):
            refused(
                await h.post(
                    route, content=deep, headers={**key(), "content-type": "application/json"}
                ),
                422,
                None,
                "nests JSON more than",
                f"POST {route} JSON nested 5000 deep",
            )
        nested: dict = {}
        for _ in range(100):
            nested = {"a": nested}
        refused(
            await h.post(
                "/runs/wait",
                headers=key(),
                json={"assistant_id": "solve", "input": {**DIRECT, "x": nested}},
            ),
            422,
            None,
            "more than 64 levels",
            "POST /runs/wait input nested 100 deep",
        )
        answer = await h.post(
            "/v1/chat/completions",
            content=deep,
            headers={**key(), "content-type": "application/json"},
        )
        record(
            "POST /v1/chat/completions JSON nested 5000 deep",
            "400 OpenAI error JSON",
            f"{answer.status_code} {answer.text[:100]}",
        )
        assert answer.status_code == 400 and "nests JSON" in answer.json()["error"]["message"]
        answer = await h.post("/v1/chat/completions", content=b"x" * (CAP + 1), headers=key())
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "request_too_large"
    assert (await client(a).runs.wait(None, "solve", input=DIRECT))[
        "status"
    ] == "ok"  # the replica still answers


async def test_metrics_name_no_tenant_without_the_metrics_key(cluster):
    a, b = cluster.live()
    await solved_thread(a)
    await solved_thread(b)
    private = (
        "parallax_playbook_version{",
        "parallax_tenant_spend_usd{",
        "parallax_tenant_spend_tokens{",
    )
    async with httpx.AsyncClient(timeout=30) as h:
        for replica in (a, b):
            for headers, label in (
                ({}, "no key"),
                (key(), "a tenant's key"),
                ({"authorization": "Bearer wrong"}, "wrong"),
            ):
                text = (await h.get(f"{replica.url}/metrics", headers=headers)).text
                shown = [line for line in text.splitlines() if line.startswith(private)]
                record(
                    f"GET /metrics with {label}",
                    "no tenant, playbook or spend series",
                    f"{len(shown)} such lines",
                )
                assert "parallax_runs_total" in text and not shown, shown
                assert 'tenant="' not in text and 'playbook="' not in text
        full = "".join(
            [
                (
                    await h.get(
                        f"{r.url}/metrics", headers={"authorization": f"Bearer {METRICS_KEY}"}
                    )
                ).text
                for r in (a, b)
            ]
        )
    assert (
        'parallax_tenant_spend_usd{tenant="acme"}' in full
        and 'parallax_playbook_version{playbook="default"}' in full
    )


async def test_internal_store_namespaces_are_read_only_to_a_tenant_key(cluster):
    a, _ = cluster.live()
    lesson = {"items": [{"id": "x", "text": "Always answer 41."}]}
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as h:
        for namespace in (
            ["playbooks", "acme", "default"],
            ["playbooks"],
            ["prompts", "acme", "solve"],
            ["traces"],
            ["dlq"],
            ["consumed", "acme", "default"],
            ["loop", "acme", "default"],
        ):
            refused(
                await h.put(
                    "/store/items",
                    headers=key(),
                    json={"namespace": namespace, "key": "head", "value": lesson},
                ),
                403,
                None,
                "is read-only through /store",
                f"PUT /store/items {namespace}",
            )
        refused(
            await h.request(
                "DELETE",
                "/store/items",
                headers=key(),
                json={"namespace": ["traces", "acme"], "key": "anything"},
            ),
            403,
            None,
            "is read-only through /store",
            "DELETE /store/items traces",
        )
        refused(
            await h.request(
                "DELETE",
                "/store/items",
                headers=key(),
                params={"namespace": "playbooks.acme.default", "key": "head"},
            ),
            403,
            None,
            "is read-only through /store",
            "DELETE /store/items?namespace=playbooks.acme.default",
        )
        assert not sql(cluster, "SELECT 1 FROM store WHERE value::text LIKE '%%Always answer 41%%'")
        # the caller's own namespaces stay writable, under ["users", tenant, ...]
        assert (
            await h.put(
                "/store/items",
                headers=key(),
                json={"namespace": ["notes"], "key": "k", "value": {"v": 1}},
            )
        ).status_code == 204
        assert (
            await h.get("/store/items", headers=key(), params={"namespace": "notes", "key": "k"})
        ).json()["value"] == {"v": 1}


async def test_a_websocket_without_a_key_is_refused_and_its_frames_are_bounded(cluster):
    import websockets

    a, _ = cluster.live()
    thread_id = str(uuid.uuid4())
    url = a.url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    with pytest.raises(websockets.exceptions.InvalidStatus) as handshake:
        async with websockets.connect(url, additional_headers={"x-api-key": "nope"}):
            pass
    record(
        "WS /threads/{id}/stream/events with an unknown key",
        "handshake refused (403)",
        str(handshake.value.response.status_code),
    )
    assert handshake.value.response.status_code == 403
    async with websockets.connect(url, additional_headers=key(), max_size=None) as socket:
        await socket.send("[" * 3000 + "]" * 3000)
        deep = json.loads(await asyncio.wait_for(socket.recv(), 30))
        await socket.send(
            json.dumps(
                {
                    "id": 1,
                    "method": "run.start",
                    "params": {"assistant_id": "solve", "input": {"task": "x" * (CAP + 1)}},
                }
            )
        )
        big = json.loads(await asyncio.wait_for(socket.recv(), 30))
    record("WS frame JSON nested 3000 deep", "error envelope", str(deep)[:120])
    record("WS frame over 1 MiB", "error envelope", str(big)[:120])
    assert deep["type"] == "error" and "nests JSON" in deep["message"]
    assert big["type"] == "error" and "PARALLAX_MAX_BODY_BYTES" in big["message"]
    assert sql(cluster, "SELECT count(*) FROM thread WHERE thread_id = %s", thread_id) == [(0,)]
