"""The deployed graph API: two Aegra replicas (`parallax serve`) on a fresh PostgreSQL database and
Redis, driven through langgraph-sdk, with the scripted fault server as the model.

Needs the server venv (Python 3.12, `pip install -e '.[server,test]'`); `.ci/run` runs this module
with it and fails when it is skipped. Replicas are started one after the other on free loopback
ports and stopped by PID; the database is created here and dropped at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections import Counter

import httpx
import pytest

from testkit.aegra_cluster import (
    METRICS_KEY,
    PARALLAX,
    Cluster,
    fill_pending,
    readme_retry_helper,
    two_replicas,
)
from testkit.fault_server import default_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta", "busy": "key-busy"}
MAX_PENDING = 4

TOPICS = {
    "current": "Current ratio = current assets / current liabilities; round to 2 decimals.",
    "quick": (
        "Quick ratio = (current assets - inventory) / current liabilities; round to 2 decimals."
    ),
    "margin": "Gross margin = (revenue - cost of goods sold) / revenue; answer as a percentage.",
    "leverage": "Debt to equity = total liabilities / shareholder equity; round to 2 decimals.",
}
TASKS = {
    "current": (
        "[topic:current] Current assets 5 and current liabilities 2: what is the current ratio?"
    ),
    "quick": (
        "[topic:quick] Current assets 9, inventory 3 and current liabilities 4: what is the quick"
        " ratio?"
    ),
    "margin": "[topic:margin] Revenue 200 and cost of goods sold 150: what is the gross margin?",
    "leverage": (
        "[topic:leverage] Total liabilities 300 and shareholder equity 150: what is debt to equity?"
    ),
}


def reply(body: dict) -> str:
    """The scripted model: a lesson for the reflector (chosen by the task's [topic:...] tag) and an
    entry for the curator (the lesson it was given); every other call gets the default schema
    instance (answers "42").
    """
    text = "\n".join(str(m.get("content")) for m in body["messages"])
    # the reflector sees the task (its tag), the curator only the lesson
    topic = next((t for t in TOPICS if f"[topic:{t}]" in text or TOPICS[t] in text), "current")
    if "You review one solved task" in text:
        return json.dumps(
            {"diagnosis": "used the wrong formula", "lessons": [TOPICS[topic]], "item_tags": []}
        )
    if "You turn lessons into playbook entries" in text:
        return json.dumps(
            {"entries": [{"section": "ratios", "text": TOPICS[topic], "about": [topic]}]}
        )
    return default_reply(body)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(
        tmp_path_factory.mktemp("deploy"), reply, KEYS, MAX_PENDING, {"PARALLAX_MAX_TOKENS": "128"}
    ) as running:
        yield running


def client(replica, tenant: str = "acme"):
    from langgraph_sdk import get_client

    return get_client(url=replica.url, api_key=KEYS[tenant])


def cli(cluster: Cluster, *args: str) -> dict | list:
    """`parallax ARGS --json` against the deployment's database (PARALLAX_DATABASE_URL)."""
    env = {
        **os.environ,
        **cluster.env,
        "PARALLAX_DATABASE_URL": cluster.database_url,
        "PARALLAX_HOME": str(cluster.work / "cli-home"),
    }
    done = subprocess.run(
        [str(PARALLAX), *args, "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def scrape(replica) -> dict[str, float]:
    """/metrics as {series with labels: value}, as the operator's scraper sees it (with the metrics
    key)."""
    async with httpx.AsyncClient(trust_env=False) as h:
        text = (
            await h.get(
                f"{replica.url}/metrics", headers={"authorization": f"Bearer {METRICS_KEY}"}
            )
        ).text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def total(samples: list[dict[str, float]], series: str) -> float:
    return sum(s.get(series, 0.0) for s in samples)


SECTIONS = "\n\n".join(
    f"# {title}\n\n" + f"The team discussed {title.lower()} at length and agreed on a plan. " * 3
    for title in ("Budget", "Hiring", "Remote work")
)


async def test_vote_and_section_runs_on_two_replicas_wait_and_stream(cluster):
    a, b = cluster.live()
    thread = await client(a).threads.create()
    vote = await client(a).runs.wait(
        thread["thread_id"], "solve", input={"task": "What is 6 * 7?", "mode": "vote", "votes": 3}
    )
    assert "__error__" not in vote, vote
    assert (vote["mode"], vote["status"], vote["vote_counts"], vote["answer"]) == (
        "vote",
        "ok",
        {"42": 3},
        "42",
    )
    assert sorted(x["kind"] for x in vote["branches"]) == ["safety", "vote", "vote", "vote"]

    thread2 = await client(b).threads.create()
    events = [
        part
        async for part in client(b).runs.stream(
            thread2["thread_id"],
            "solve",
            input={"task": SECTIONS, "question": "What was agreed?", "mode": "section"},
            context={"slice_chars": 250},
            stream_mode="values",
        )
    ]
    values = [e.data for e in events if e.event == "values"]
    assert len(values) >= 3, [
        e.event for e in events
    ]  # state after the input, the route, ..., the end
    section = values[-1]
    assert section["mode"] == "section" and section["status"] in (
        "ok",
        "needs_review",
    ), section.get("reason")
    assert sum(x["kind"] == "slice" for x in section["branches"]) == 3

    # both runs' traces are in PostgreSQL under the tenant: through the API (a bare ["traces"] is
    # the caller's own) and through the CLI on the same database
    stored = await client(b).store.search_items(["traces"], limit=10)
    assert {i["key"] for i in stored["items"]} == {vote["trace_id"], section["trace_id"]}
    assert all(i["namespace"] == ["traces", "acme"] for i in stored["items"])
    assert (await client(a, "beta").store.search_items(["traces"], limit=10))["items"] == []
    shown = cli(cluster, "trace", vote["trace_id"], "--tenant", "acme")
    assert (
        shown["trace_id"] == vote["trace_id"]
        and len(shown["branches"]) == 4
        and shown["tenant"] == "acme"
    )
    state = await client(a).threads.get_state(
        thread2["thread_id"]
    )  # the thread B ran, read through A
    assert state["values"]["trace_id"] == section["trace_id"]


async def test_keys_name_tenants_and_tenants_never_see_each_other(cluster):
    a, b = cluster.live()
    thread = await client(a).threads.create()
    done = await client(a).runs.wait(
        thread["thread_id"], "solve", input={"task": "What is 2 + 2?", "mode": "direct"}
    )
    async with httpx.AsyncClient(trust_env=False) as h:
        assert (await h.get(f"{b.url}/threads/{thread['thread_id']}")).status_code == 401
        assert (
            await h.get(f"{b.url}/threads/{thread['thread_id']}", headers={"x-api-key": "nope"})
        ).status_code == 401
        beta = {"x-api-key": KEYS["beta"]}
        assert (
            await h.get(f"{b.url}/threads/{thread['thread_id']}", headers=beta)
        ).status_code == 404
        run = await h.post(
            f"{b.url}/threads/{thread['thread_id']}/runs",
            headers=beta,
            json={"assistant_id": "solve", "input": {"task": "x"}},
        )
        assert run.status_code == 404
        searched = await h.post(f"{a.url}/threads/search", headers=beta, json={"limit": 100})
        assert thread["thread_id"] not in {t["thread_id"] for t in searched.json()}
        peek = await h.get(
            f"{a.url}/store/items",
            headers=beta,
            params={"namespace": ["traces", "acme"], "key": done["trace_id"]},
        )
        assert peek.status_code == 403 and "another tenant" in peek.json()["message"]
    # the tenant comes from the key: an input naming another tenant is refused, and nothing is
    # written for it
    other = await client(a).threads.create()
    with pytest.raises(Exception, match="your API key belongs to tenant 'acme'"):
        await client(a).runs.wait(
            other["thread_id"], "solve", input={"task": "What is 2 + 2?", "tenant": "beta"}
        )
    assert (await client(a, "beta").store.search_items(["traces"], limit=10))["items"] == []
    same = await client(a).threads.create()
    ok = await client(a).runs.wait(
        same["thread_id"],
        "solve",
        input={"task": "What is 2 + 2?", "tenant": "acme", "mode": "direct"},
    )
    assert ok["status"] == "ok"


async def test_overload_gets_429_with_retry_after_and_the_documented_client_gets_through(cluster):
    from langgraph_sdk.errors import RateLimitError

    a, b = cluster.live()
    busy = client(a, "busy")
    cluster.set_model(latency_ms=1500)
    try:
        accepted = await fill_pending(busy, MAX_PENDING)
        thread = await client(b, "busy").threads.create()
        with pytest.raises(RateLimitError) as refused:
            await client(b, "busy").runs.create(
                thread["thread_id"], "solve", input={"task": "What is 1 + 1?"}
            )
        assert refused.value.response.status_code == 429
        assert refused.value.response.headers["retry-after"] == "1"
        async with httpx.AsyncClient(
            trust_env=False
        ) as h:  # a stateless run is refused the same way
            r = await h.post(
                f"{a.url}/runs/wait",
                headers={"x-api-key": KEYS["busy"]},
                json={"assistant_id": "solve", "input": {"task": "What is 1 + 1?"}},
            )
            assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert (await scrape(a))["parallax_pending_runs"] >= MAX_PENDING
        other = await client(a).threads.create()  # another tenant is not held back
        await client(a).runs.create(
            other["thread_id"], "solve", input={"task": "What is 1 + 1?", "mode": "direct"}
        )

        retry_on_429, attempts = readme_retry_helper(), []

        async def submit():
            attempts.append(time.monotonic())
            return await client(b, "busy").runs.create(
                thread["thread_id"], "solve", input={"task": "What is 1 + 1?", "mode": "direct"}
            )

        run = await retry_on_429(submit)
        assert len(attempts) >= 2  # refused at first, accepted once earlier runs finished
        accepted.append((thread["thread_id"], run["run_id"]))
        for thread_id, run_id in accepted:  # nothing accepted was dropped
            await busy.runs.join(thread_id, run_id)
            assert (await busy.runs.get(thread_id, run_id))["status"] == "success"
    finally:
        cluster.set_model(latency_ms=20)
    import psycopg

    with psycopg.connect(cluster.database_url) as conn:
        rows = conn.execute(
            "SELECT status, count(*) FROM runs WHERE user_id = 'busy' GROUP BY status"
        ).fetchall()
    assert dict(rows) == {"success": MAX_PENDING + 1}


async def test_metrics_move_with_runs_and_carry_no_tenant(cluster):
    a, b = cluster.live()
    before = [await scrape(r) for r in (a, b)]
    for replica, mode in ((a, "vote"), (b, "direct")):
        thread = await client(replica).threads.create()
        out = await client(replica).runs.wait(
            thread["thread_id"], "solve", input={"task": "What is 6 * 7?", "mode": mode, "votes": 3}
        )
        assert out["status"] == "ok"
    after = [await scrape(r) for r in (a, b)]
    runs_ok = 'parallax_runs_total{graph="solve",status="ok"}'
    assert total(after, runs_ok) - total(before, runs_ok) == 2
    votes_ok = 'parallax_branches_total{kind="vote",status="ok"}'
    assert total(after, votes_ok) - total(before, votes_ok) == 3
    direct_seconds = 'parallax_branch_duration_seconds_count{kind="direct"}'
    assert total(after, direct_seconds) - total(before, direct_seconds) == 1
    # a branch that gives up is a dead letter: counted here, listed and retried by the CLI on the
    # same database
    cluster.set_model(rate_500=1.0)
    try:
        thread = await client(a).threads.create()
        failed = await client(a).runs.wait(
            thread["thread_id"],
            "solve",
            input={"task": "What is 6 * 7?", "mode": "direct"},
            context={"max_attempts": 1},
        )
    finally:
        cluster.set_model(rate_500=0.0)
    assert failed["status"] == "failed"
    final = [await scrape(r) for r in (a, b)]
    runs_failed = 'parallax_runs_total{graph="solve",status="failed"}'
    assert total(final, runs_failed) - total(after, runs_failed) == 1
    assert (
        total(final, "parallax_dead_letters_total") - total(after, "parallax_dead_letters_total")
        == 1
    )
    letters = cli(cluster, "dlq", "list", "--tenant", "acme")
    assert [d["trace_id"] for d in letters] == [failed["trace_id"]]
    retried = cli(cluster, "dlq", "retry", letters[0]["id"], "--tenant", "acme")
    assert retried["status"] == "resolved"
    for sample in after:
        names = {s.split("{")[0] for s in sample}
        assert {
            "parallax_pending_runs",
            "parallax_open_circuits",
            "parallax_dead_letters_total",
            "http_requests_total",
        } <= names  # Parallax's series beside Aegra's
        labelled = [s for s in sample if s.startswith("parallax_") and "{" in s]
        assert not [s for s in labelled if "tenant=" in s or "user" in s.split("{")[1]], labelled


async def test_learn_with_approve_interrupts_on_a_and_is_resumed_on_b(cluster):
    a, b = cluster.live()
    thread = await client(a).threads.create()
    first = await client(a).runs.wait(
        thread["thread_id"],
        "learn",
        input={
            "tasks": [{"id": "t1", "input": TASKS["current"], "target": "2.5"}],
            "batch": 1,
            "mode": "direct",
            "playbook": "fin",
            "approve": True,
        },
    )
    assert first.get("__interrupt__"), first
    question = first["__interrupt__"][0]["value"]
    assert (
        question["question"].startswith("Accept this playbook update") and question["diff"]["added"]
    )
    interrupted = 'parallax_runs_total{graph="learn",status="interrupted"}'
    samples = [await scrape(r) for r in (a, b)]
    assert total(samples, interrupted) == 1, [
        (k, v) for s in samples for k, v in s.items() if "runs_total" in k
    ]
    a.stop()  # replica A is gone: the resume can only run on B
    state = await client(b).threads.get_state(thread["thread_id"])
    assert state["next"] == ["gate"]
    done = await client(b).runs.wait(thread["thread_id"], "learn", command={"resume": "yes"})
    assert (done["accepted"], done["from_version"], done["to_version"]) == (True, 0, 1), done
    history = cli(cluster, "playbook", "history", "--playbook", "fin", "--tenant", "acme")
    assert [(r["version"], r["parent"]) for r in history] == [(1, 0)]
    shown = cli(cluster, "playbook", "show", "--playbook", "fin", "--tenant", "acme")
    assert [i["text"] for i in shown["items"]] == [TOPICS["current"]]
    assert (await scrape(b))['parallax_playbook_version{playbook="fin"}'] == 1
    cluster.start_replica(a.port)  # back to two replicas for the next tests


async def test_concurrent_learn_runs_on_both_replicas_commit_a_linear_history(cluster):
    a, b = cluster.live()
    cluster.set_model(
        latency_ms=300
    )  # the runs overlap: all four reach their commit at about the same time
    try:
        started = []
        for n, topic in enumerate(TOPICS):
            replica = (a, b)[n % 2]
            thread = await client(replica).threads.create()
            run = await client(replica).runs.create(
                thread["thread_id"],
                "learn",
                input={
                    "tasks": [{"id": topic, "input": TASKS[topic], "target": "1"}],
                    "batch": 1,
                    "mode": "direct",
                    "playbook": "shared",
                },
            )
            started.append((replica, thread["thread_id"], run["run_id"]))
        outs = await asyncio.gather(*(client(r).runs.join(t, run_id) for r, t, run_id in started))
    finally:
        cluster.set_model(latency_ms=20)
    assert all(o["accepted"] and o["to_version"] >= 1 for o in outs), outs
    assert sorted(o["to_version"] for o in outs) == [1, 2, 3, 4]  # each run made its own version
    history = cli(cluster, "playbook", "history", "--playbook", "shared", "--tenant", "acme")
    assert [(r["version"], r["parent"]) for r in history] == [(1, 0), (2, 1), (3, 2), (4, 3)]
    # they ran at once: every run started before any of them finished (whether a commit also found
    # its base moved depends on the milliseconds between a batch's merge and its commit; the
    # advisory lock under that race is tested head-on in test_postgres_store.py)
    runs = [await client(r).runs.get(t, run_id) for r, t, run_id in started]
    assert max(r["created_at"] for r in runs) < min(r["updated_at"] for r in runs), runs
    head = cli(cluster, "playbook", "show", "--playbook", "shared", "--tenant", "acme")
    assert sorted(i["text"] for i in head["items"]) == sorted(
        TOPICS.values()
    )  # every operation is in the head


async def test_a_replica_killed_mid_run_is_taken_over_without_repeating_finished_branches(cluster):
    a, b = cluster.live()
    cluster.model.reset()
    cluster.set_model(latency_ms=1500)
    try:
        thread = await client(a).threads.create()
        run = await client(a).runs.create(
            thread["thread_id"],
            "solve",
            input={"task": "What is 6 * 7?", "mode": "vote", "votes": 6},
            context={"max_concurrency": 2, "max_attempts": 1, "early_stop": False},
        )
        deadline = time.monotonic() + 60
        victim = None
        while (
            victim is None
            or sum(e["status"] == 200 for e in cluster.model.log() if e.get("messages_hash")) < 2
        ):
            assert time.monotonic() < deadline, "the run never got two answers"
            victim = victim or cluster.executing_replica(run["run_id"])
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the two finished vote tasks reach the checkpoint
        victim.kill()
        killed_at = time.monotonic()
        chat = [e for e in cluster.model.log() if e.get("messages_hash")]
        finished = {e["temperature"] for e in chat if e["status"] == 200}
        assert len(finished) == 2 and len(chat) < 6, chat
        survivor = b if victim is a else a
        await client(survivor).runs.join(thread["thread_id"], run["run_id"])
        took_over_s = time.monotonic() - killed_at
        status = (await client(survivor).runs.get(thread["thread_id"], run["run_id"]))["status"]
        values = (await client(survivor).threads.get_state(thread["thread_id"]))["values"]
    finally:
        cluster.set_model(latency_ms=20)
    assert status == "success" and values["vote_counts"] == {"42": 6} and values["status"] == "ok"
    calls = Counter(
        e["temperature"]
        for e in cluster.model.log()
        if e.get("messages_hash") and e["status"] == 200
    )
    assert len(calls) == 6 and sum(calls.values()) == 6, calls  # every vote answered once
    assert all(calls[t] == 1 for t in finished), calls  # finished votes were not called again
    every = Counter(e["status"] for e in cluster.model.log() if e.get("messages_hash"))
    print(
        f"kill test: killed replica {victim.port} after {len(finished)} answered votes; run"
        f" finished on {survivor.port} {took_over_s:.1f}s later; model calls by status"
        f" {dict(every)}; answered per vote {dict(calls)}"
    )


def test_replicas_started_at_once_on_a_fresh_database_both_come_up(tmp_path):
    """The start-up races Aegra has on a fresh database (UniqueViolation in CREATE TABLE, and in the
    insert of each graph's default assistant) cannot happen: `parallax serve` holds an advisory lock
    from its migrations until it is ready, so the replicas come up one after another and each finds
    the work done.
    """
    fresh = Cluster(tmp_path, {"PARALLAX_API_KEYS": "key-acme:acme"}).create()
    try:
        launched = [fresh.launch(), fresh.launch(), fresh.launch()]
        for replica in launched:
            fresh.wait_ready(replica)
        logs = "".join(r.log() for r in launched)
        assert "UniqueViolation" not in logs and logs.count("migrated ") == 3
    finally:
        fresh.close()
