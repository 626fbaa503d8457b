"""Users below the tenant on the deployed graph API: JWTs from a JWKS file beside the static keys,
two replicas.

Who: alice and bob, users of tenant acme; ada, acme's administrator (role claim "admin"); eve, a
user of tenant beta; and acme's static key, which is acme's administrator as it always was. Each
makes what a chat product's users make (a thread with a run, a cron, a store item, a completion on
/v1, a tool call on /mcp) and every other caller tries to read and change it. Goal: a user reaches
only their own, the administrator the tenant's, nobody another tenant's. The table the test asserts
is printed (`-s`) to be pasted.

Tokens: one signed by the JWKS's key is accepted (200); one expired, one for another audience and
one signed by another key are 401 with a line that says which. Needs the server venv; `.ci/run` runs
it with `-m deploy` and fails when it is skipped.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from testkit.aegra_cluster import two_replicas
from testkit.review_model import review_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta"}
ISSUER, AUDIENCE = "https://id.example.test/", "parallax-users-test"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
SOLVE = {"task": "What is 2 + 2?", "mode": "direct"}
YEARLY = "0 0 1 1 *"


def token(
    user: str,
    tenant: str = "acme",
    role: str | None = None,
    *,
    key: Any = KEY,
    aud: str = AUDIENCE,
    exp_in: int = 600,
) -> str:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": aud,
        "sub": user,
        "tenant": tenant,
        "iat": now,
        "exp": now + exp_in,
        **({"role": role} if role else {}),
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "test-key-1"})


CALLERS = {
    "alice": token("alice"),
    "bob": token("bob"),
    "ada (admin)": token("ada", role="admin"),
    "eve (beta)": token("eve", "beta"),
    "acme key": KEYS["acme"],
}
"""Who asks, and the credential each sends (a JWT, or acme's static key)."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("deploy-users")
    jwks = work / "jwks.json"
    public = {
        **json.loads(RSAAlgorithm.to_jwk(KEY.public_key())),
        "kid": "test-key-1",
        "alg": "RS256",
        "use": "sig",
    }
    jwks.write_text(json.dumps({"keys": [public]}))
    env = {
        "PARALLAX_JWT_JWKS": str(jwks),
        "PARALLAX_JWT_ISSUER": ISSUER,
        "PARALLAX_JWT_AUDIENCE": AUDIENCE,
    }
    with two_replicas(work, review_reply, KEYS, 20, extra_env=env) as running:
        yield running


def http(replica, credential: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=replica.url,
        headers={"Authorization": f"Bearer {credential}"},
        timeout=120,
        trust_env=False,
    )


def mcp_client(replica, credential: str) -> Client:
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {credential}"}, timeout=120)
    return Client(streamable_http_client(f"{replica.url}/mcp", http_client=client))


async def made_by(replica, who: str) -> dict[str, str]:
    """What `who` makes: a thread with a run, a cron, a store item, a /v1 completion's thread, an
    /mcp call's thread."""
    async with http(replica, CALLERS[who]) as h:
        thread = (await h.post("/threads", json={})).json()["thread_id"]
        run = await h.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "solve", "input": SOLVE}
        )
        assert run.status_code == 200, run.text
        run_id = (await h.get(f"/threads/{thread}/runs")).json()[0]["run_id"]
        cron = await h.post(
            "/runs/crons", json={"assistant_id": "solve", "schedule": YEARLY, "input": SOLVE}
        )
        assert cron.status_code == 200, cron.text
        put = await h.put(
            "/store/items", json={"namespace": ["notes"], "key": "n1", "value": {"by": who}}
        )
        assert put.status_code == 204, put.text
        v1 = await h.post(
            "/v1/chat/completions",
            json={
                "model": "parallax-direct",
                "messages": [{"role": "user", "content": "What is 6 * 7?"}],
            },
        )
        assert v1.status_code == 200, v1.text
    async with mcp_client(replica, CALLERS[who]) as mcp:
        called = await mcp.call_tool("solve", {"task": "What is 2 + 2?", "mode": "direct"})
    assert not called.is_error, called
    return {
        "thread": thread,
        "run": run_id,
        "cron": cron.json()["cron_id"],
        "v1": v1.json()["parallax"]["thread_id"],
        "mcp": called.structured_content["thread_id"],
        "trace": run.json()["trace_id"],
    }


async def what_each_reaches(
    replica, who: str, theirs: dict[str, str], owner: str
) -> dict[str, str]:
    """What `who` gets for each of `owner`'s records: HTTP status, or listed / not listed / the
    value read."""
    out: dict[str, str] = {}
    async with http(replica, CALLERS[who]) as h:
        out["GET thread"] = str((await h.get(f"/threads/{theirs['thread']}")).status_code)
        found = (await h.post("/threads/search", json={"limit": 1000})).json()
        out["threads/search"] = (
            "listed" if theirs["thread"] in {t["thread_id"] for t in found} else "-"
        )
        out["GET state"] = str((await h.get(f"/threads/{theirs['thread']}/state")).status_code)
        out["GET run"] = str(
            (await h.get(f"/threads/{theirs['thread']}/runs/{theirs['run']}")).status_code
        )
        out["list runs"] = str((await h.get(f"/threads/{theirs['thread']}/runs")).status_code)
        out["PATCH thread"] = str(
            (
                await h.patch(f"/threads/{theirs['thread']}", json={"metadata": {"seen": who}})
            ).status_code
        )
        new_run = await h.post(
            f"/threads/{theirs['thread']}/runs", json={"assistant_id": "solve", "input": SOLVE}
        )
        out["new run on thread"] = str(new_run.status_code)
        if new_run.status_code == 200:
            await h.get(f"/threads/{theirs['thread']}/runs/{new_run.json()['run_id']}/join")
        crons = (await h.post("/runs/crons/search", json={"limit": 1000})).json()
        out["crons/search"] = "listed" if theirs["cron"] in {c["cron_id"] for c in crons} else "-"
        out["PATCH cron"] = str(
            (await h.patch(f"/runs/crons/{theirs['cron']}", json={"enabled": True})).status_code
        )
        namespace = ["notes"] if who == owner else ["by_user", owner, "notes"]
        item = (
            await h.get("/store/items", params={"namespace": ".".join(namespace), "key": "n1"})
        ).json()
        out["store item"] = f"{'.'.join(namespace)}: " + (
            "read" if item and item["value"] == {"by": owner} else "-"
        )
        out["GET /v1 thread"] = str((await h.get(f"/threads/{theirs['v1']}")).status_code)
        out["GET /mcp thread"] = str((await h.get(f"/threads/{theirs['mcp']}")).status_code)
        trace = await h.get("/store/items", params={"namespace": "traces", "key": theirs["trace"]})
        out["GET trace"] = (
            "read" if trace.status_code == 200 and trace.json() else f"{trace.status_code} -"
        )
    out["WebSocket"] = await socket_answer(replica, who, theirs["thread"])
    return out


async def socket_answer(replica, who: str, thread_id: str) -> str:
    """Whether the thread's event WebSocket lets `who` in (a refused handshake is HTTP 403)."""
    import websockets

    url = replica.url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    try:
        async with websockets.connect(
            url, additional_headers={"Authorization": f"Bearer {CALLERS[who]}"}
        ):
            return "open"
    except websockets.exceptions.InvalidStatus as refused:
        return str(refused.response.status_code)


def print_table(title: str, rows: dict[str, dict[str, str]]) -> None:
    columns = list(next(iter(rows.values())))
    print(f"\n{title}\n| caller | " + " | ".join(columns) + " |\n|" + "---|" * (len(columns) + 1))
    for who, cells in rows.items():
        print(f"| {who} | " + " | ".join(cells[c] for c in columns) + " |")


async def test_a_user_reaches_only_their_own_the_administrator_the_tenants_nobody_another_tenants(
    cluster,
):
    a, b = cluster.replicas[:2]
    alices = await made_by(a, "alice")
    rows = {who: await what_each_reaches(b, who, alices, "alice") for who in CALLERS}
    print_table("alice's records, asked for by each caller (on the other replica)", rows)
    own = {
        "GET thread": "200",
        "threads/search": "listed",
        "GET state": "200",
        "GET run": "200",
        "list runs": "200",
        "PATCH thread": "200",
        "new run on thread": "200",
        "crons/search": "listed",
        "PATCH cron": "200",
        "store item": "notes: read",
        "GET /v1 thread": "200",
        "GET /mcp thread": "200",
        "GET trace": "read",
        "WebSocket": "open",
    }
    assert rows["alice"] == own
    admin = {**own, "store item": "by_user.alice.notes: read"}
    assert rows["ada (admin)"] == admin
    assert (
        rows["acme key"] == admin
    )  # a static key is its tenant's administrator, as before users existed
    hidden = {
        "GET thread": "404",
        "threads/search": "-",
        "GET state": "404",
        "GET run": "404",
        "list runs": "404",
        "PATCH thread": "404",
        "new run on thread": "404",
        "crons/search": "-",
        "PATCH cron": "404",
        "store item": "by_user.alice.notes: -",
        "GET /v1 thread": "404",
        "GET /mcp thread": "404",
        "GET trace": "200 -",
        "WebSocket": "403",
    }
    assert rows["bob"] == hidden
    assert rows["eve (beta)"] == hidden


async def test_only_the_administrator_changes_what_the_tenants_runs_do_or_reads_every_users_records(
    cluster,
):
    a, _ = cluster.replicas[:2]
    asks = {
        "run release (status)": (
            "POST",
            "/runs/wait",
            {
                "assistant_id": "release",
                "input": {"subject": "playbook/default", "action": "status"},
            },
        ),
        "run stats": ("POST", "/runs/wait", {"assistant_id": "stats", "input": {}}),
        "run learn": (
            "POST",
            "/runs/wait",
            {"assistant_id": "learn", "input": {"tasks": ["What is 2 + 2?"]}},
        ),
        "search traces": ("POST", "/store/items/search", {"namespace_prefix": ["traces"]}),
        "write playbooks": (
            "PUT",
            "/store/items",
            {"namespace": ["playbooks", "default"], "key": "x", "value": {"lessons": []}},
        ),
        "read playbooks": ("POST", "/store/items/search", {"namespace_prefix": ["playbooks"]}),
        "create assistant": ("POST", "/assistants", {"graph_id": "solve", "name": "terse"}),
        "search assistants": ("POST", "/assistants/search", {"limit": 5}),
    }
    rows: dict[str, dict[str, str]] = {}
    for who in ("alice", "ada (admin)", "acme key"):
        rows[who] = {}
        async with http(a, CALLERS[who]) as h:
            for name, (method, path, body) in asks.items():
                if (
                    name == "create assistant"
                ):  # one of the same graph and config in the tenant would be 409
                    body = {**body, "name": f"terse for {who}", "config": {"tags": [who]}}
                answer = await h.request(method, path, json=body)
                rows[who][name] = str(answer.status_code)
                if who == "alice" and answer.status_code == 403 and name != "write playbooks":
                    assert "administrator" in answer.json()["message"], answer.text
    print_table("what only the tenant's administrator may do (HTTP status)", rows)
    assert rows["alice"] == {
        "run release (status)": "403",
        "run stats": "403",
        "run learn": "403",
        "search traces": "403",
        "write playbooks": "403",
        "read playbooks": "200",
        "create assistant": "403",
        "search assistants": "200",
    }
    for admin in ("ada (admin)", "acme key"):
        assert rows[admin]["run release (status)"] == rows[admin]["run stats"] == "200", rows[admin]
        assert rows[admin]["search traces"] == rows[admin]["read playbooks"] == "200"
        assert (
            rows[admin]["write playbooks"] == "403"
        )  # written by learn and release only, for every caller (as before)
        assert rows[admin]["create assistant"] == rows[admin]["search assistants"] == "200"
        assert (
            rows[admin]["run learn"] == "422"
        )  # past the role check, to its input's (tasks are objects)


async def test_feedback_reaches_only_the_users_own_trace_and_only_the_admin_corrects_an_answer(
    cluster,
):
    a, b = cluster.replicas[:2]
    async with mcp_client(a, CALLERS["alice"]) as mcp:
        trace_id = (
            await mcp.call_tool("solve", {"task": "What is 2 + 2?", "mode": "direct"})
        ).structured_content["trace_id"]
    rows: dict[str, dict[str, str]] = {}
    for who in ("alice", "bob", "ada (admin)"):
        async with mcp_client(b, CALLERS[who]) as mcp:
            scored = await mcp.call_tool("feedback", {"trace_id": trace_id, "score": "up"})
        async with http(b, CALLERS[who]) as h:
            corrected = await h.post(
                "/runs/wait",
                json={"assistant_id": "feedback", "input": {"trace_id": trace_id, "correct": "4"}},
            )
        rows[who] = {
            "/mcp feedback (score)": (
                "error: " + scored.content[0].text[:60] if scored.is_error else "ok"
            ),
            "feedback run with correct": str(corrected.status_code),
        }
    print_table("feedback on alice's trace", rows)
    assert rows["alice"] == {"/mcp feedback (score)": "ok", "feedback run with correct": "403"}
    assert (
        rows["bob"]["/mcp feedback (score)"].startswith("error: ")
        and "no trace" in rows["bob"]["/mcp feedback (score)"]
    )
    assert rows["bob"]["feedback run with correct"] == "403"
    assert rows["ada (admin)"] == {
        "/mcp feedback (score)": "ok",
        "feedback run with correct": "200",
    }


async def test_a_jwt_from_the_jwks_is_accepted_and_expired_wrong_audience_or_another_key_are_401(
    cluster,
):
    a, _ = cluster.replicas[:2]
    tokens = {
        "signed by the JWKS key": token("alice"),
        "expired": token("alice", exp_in=-3600),
        "wrong audience": token("alice", aud="another-api"),
        "signed by another key": token("alice", key=OTHER_KEY),
    }
    rows = {}
    for name, value in tokens.items():
        async with http(a, value) as h:
            answer = await h.post("/threads/search", json={"limit": 1})
        rows[name] = {
            "status": str(answer.status_code),
            "message": "" if answer.status_code == 200 else answer.json()["message"],
        }
        assert value not in answer.text
    print_table("JWTs on POST /threads/search", rows)
    assert [r["status"] for r in rows.values()] == ["200", "401", "401", "401"]
    assert "expired" in rows["expired"]["message"]
    assert "wrong audience" in rows["wrong audience"]["message"]
    assert "signed by another key" in rows["signed by another key"]["message"]
