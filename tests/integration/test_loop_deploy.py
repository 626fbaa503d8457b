"""The closed loop on the deployed graph API: two `parallax serve` replicas on PostgreSQL and Redis,
a cron set up with `parallax loop install` (langgraph-sdk `client.crons`) fires the `loop` graph,
the candidate goes on canary, runs on both replicas see the split, and the rule's decision lands
once while both replicas count runs at once.

The model is the fault server with a scripted reply: the reflector always proposes LESSON, and the
solver answers "4" (right) without it in its prompt and "5" (wrong) with it, so the canary is worse
and the rule rolls it back. Needs the server venv; `.ci/run` runs it with `-m deploy` and fails when
it is skipped.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from parallax.logic.release_decision import assigned_arm
from testkit.aegra_cluster import two_replicas
from testkit.fault_server import default_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta"}
LESSON = "Always add the two numbers of the sum, then state the total."
SUBJECT = "playbook/default"


def prompt_text(body: dict) -> str:
    return "\n".join(str(m.get("content")) for m in body.get("messages", []))


def loop_reply(body: dict) -> str:
    text = prompt_text(body)
    if "You review one solved task" in text:
        return json.dumps({"diagnosis": "missed the sum", "lessons": [LESSON], "item_tags": []})
    if "You turn lessons into playbook entries" in text:
        return json.dumps({"entries": [{"section": "sums", "text": LESSON, "about": ["sum"]}]})
    reply = default_reply(body)
    try:
        data = json.loads(reply)
    except ValueError:
        return reply
    if "answer" in data:
        data["answer"] = "5" if LESSON in text else "4"
    return json.dumps(data)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(
        tmp_path_factory.mktemp("loop-deploy"),
        loop_reply,
        KEYS,
        50,
        extra_env={"CRON_ENABLED": "true", "CRON_POLL_INTERVAL_SECONDS": "1"},
    ) as running:
        yield running


def client(replica, tenant: str = "acme"):
    from langgraph_sdk import get_client

    return get_client(url=replica.url, api_key=KEYS[tenant])


async def solve(replica, thread_id: str, i: int, target: str | None = None) -> dict:
    given = {
        "task": f"Add the two numbers 2 and 2 (order {i}): state the sum total.",
        "mode": "direct",
    }
    out = await client(replica).runs.wait(
        thread_id, "solve", input={**given, **({"target": target} if target else {})}
    )
    assert "__error__" not in out, out
    return out


async def threads_on_arm(replica, arm: str, n: int, share: float) -> list[str]:
    """n new threads of `replica` that the release's hash puts on `arm`."""
    found: list[str] = []
    while len(found) < n:
        thread = await client(replica).threads.create()
        if assigned_arm(SUBJECT, thread["thread_id"], share) == arm:
            found.append(thread["thread_id"])
    return found


async def labels(replica) -> dict:
    item = await client(replica).store.get_item(["playbooks", "acme", "default"], "labels")
    return item["value"] if item else {}


async def wait_for(check, timeout_s: float = 90.0):
    for _ in range(int(timeout_s * 2)):
        if value := await check():
            return value
        await asyncio.sleep(0.5)
    raise AssertionError("timed out")


async def test_a_cron_fires_the_loop_the_canary_splits_both_replicas_and_its_decision_lands_once(
    cluster,
):
    a, b = cluster.live()
    # production runs on both replicas, no person: their status is the signal
    for i in range(4):
        replica = (a, b)[i % 2]
        await solve(replica, (await client(replica).threads.create())["thread_id"], i)

    installed = cluster.cli(
        "loop",
        "install",
        "--every",
        "1h",
        "--url",
        a.url,
        "--api-key",
        KEYS["acme"],
        "--share",
        "50",
        "--min-runs",
        "3",
        "--max-runs",
        "6",
    )
    assert installed["schedule"] == "0 * * * *" and installed["cron_id"]
    crons = await client(b).crons.search(assistant_id="loop", limit=10)
    assert [c["cron_id"] for c in crons] == [installed["cron_id"]]

    # the cron's first round puts the candidate on canary (no run carried a target: no offline gate
    # claimed)
    release = await wait_for(lambda: _running(b))
    assert release["version"] == 1 and release["share"] == 50 and release["started_by"] == "loop"
    assert "none claimed" in release["reason"]
    rounds = await client(a).store.search_items(["loop", "acme", "default"], limit=20)
    learned = [r["value"] for r in rounds["items"] if r["key"].startswith("round-")]
    assert [r["status"] for r in learned] == ["learned"] and learned[0]["tenant"] == "acme"
    assert learned[0]["traces"]["consumed"] == 4
    # the learn graph's own input on the API: the same runs are not learned from twice
    again = await client(b).runs.wait(None, "learn", input={"from_traces": True})
    assert "__error__" not in again, again
    assert (
        again["traces"]["claimed"] == 0
        and again["traces"]["taken_before"] == 4
        and again["to_version"] == 1
    )

    # both replicas serve both arms at once; runs with a target: the canary's lesson makes them
    # wrong
    share = release["share"]
    jobs = []
    for replica in (a, b):
        for arm in ("canary", "production"):
            for thread_id in await threads_on_arm(replica, arm, 2, share):
                jobs.append((replica, arm, thread_id))
    outs = await asyncio.gather(
        *(solve(r, t, 10 + i, target="4") for i, (r, _, t) in enumerate(jobs))
    )
    for (replica, arm, _), out in zip(jobs, outs, strict=True):
        assert out["playbook_version"] == (1 if arm == "canary" else 0), (
            replica.port,
            arm,
            out["playbook_version"],
        )
    assert {
        (r.port, out["playbook_version"]) for (r, _, _), out in zip(jobs, outs, strict=True)
    } == {(a.port, 0), (a.port, 1), (b.port, 0), (b.port, 1)}

    # four trials per arm, counted by two replicas at once: the rule rolled the canary back, once
    record = await labels(a)
    assert record["release"] is None and record["production"] == 0
    ended = [r for r in record["releases"] if r["id"] == release["id"]]
    assert len(ended) == 1 and (ended[0]["decision"], ended[0]["decided_by"]) == (
        "rollback",
        "auto",
    )
    assert sum(e["label"] == "canary" and e["to"] is None for e in record["events"]) == 1
    arms = ended[0]["arms"]
    # decided at the first look (3 runs in the smaller arm); trials that finished after it are not
    # counted
    assert (
        min(arms["canary"]["runs"], arms["production"]["runs"]) == 3
        and arms["canary"]["successes"] == 0
    )
    assert arms["canary"]["runs"] + arms["production"]["runs"] <= len(jobs)

    # the scheduler's own firing (made due now) runs as the cron owner's tenant; the rolled-back
    # lesson is not the base of what it learns next
    import psycopg

    with psycopg.connect(cluster.database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE crons SET next_run_date = now() WHERE cron_id = %s", (installed["cron_id"],)
        )

    async def second_round():
        found = await client(a).store.search_items(["loop", "acme", "default"], limit=20)
        done = [r["value"] for r in found["items"] if r["key"].startswith("round-")]
        return done if len(done) >= 2 else None

    both = sorted(await wait_for(second_round), key=lambda r: r["started_at"])
    assert both[1]["tenant"] == "acme" and both[1]["reset"]["items_of"] == 0
    await client(a).crons.delete(installed["cron_id"])
    status = cluster.cli("loop", "status", "--tenant", "acme")
    assert [r["round"] for r in status["rounds"]] == [r["round"] for r in both]
    beta = await client(a, "beta").store.search_items(["loop", "beta", "default"], limit=20)
    assert beta["items"] == []


async def _running(replica):
    return (await labels(replica)).get("release")
