"""The data loop under a real `langgraph dev`: a canary served by thread, feedback, stats and the
release graph, through langgraph-sdk. `langgraph dev` runs graphs under blockbuster, so this also
shows the release lock, feedback lock and store reads never block the event loop."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client

from tests.integration.test_graph_api import dev_server  # noqa: F401 (the module-scoped fixture)

pytestmark = pytest.mark.integration
TENANT = "loop"


async def test_release_feedback_and_stats_through_the_api(dev_server):  # noqa: F811
    client = get_client(url=dev_server.url)
    # two playbook versions, written the way a learn run would, through the store API
    for version, items in (
        (1, ["Add the numbers."]),
        (2, ["Add the numbers.", "Answer with digits only."]),
    ):
        record = {
            "name": "fin",
            "version": version,
            "parent": version - 1,
            "created_by": "test",
            "items": [{"id": f"pb-{i}", "text": t} for i, t in enumerate(items)],
        }
        await client.store.put_item(["playbooks", TENANT, "fin"], f"v{version:06d}", record)
        await client.store.put_item(["playbooks", TENANT, "fin"], "head", record)
    started = await client.runs.wait(
        None,
        "release",
        input={
            "subject": "playbook/fin",
            "action": "release",
            "version": 2,
            "canary": 50,
            "manual": True,
            "by": "ops",
            "reason": "api canary",
            "tenant": TENANT,
        },
    )
    assert "__error__" not in started, started
    assert started["view"]["running"] and started["view"]["production"] == 1

    versions = {}
    for _ in range(6):
        thread = await client.threads.create()
        out = await client.runs.wait(
            thread["thread_id"],
            "solve",
            input={
                "task": "What is 2 + 2?",
                "mode": "direct",
                "playbook": "fin",
                "tenant": TENANT,
                "target": "4",
            },
        )
        assert "__error__" not in out, out
        errors = [b.get("error") for b in out["branches"] if b.get("error")]
        assert not [e for e in errors if "Blocking" in e], errors
        versions[out["trace_id"]] = out["playbook_version"]
    assert set(versions.values()) <= {1, 2}

    trace_id = next(iter(versions))
    fed = await client.runs.wait(
        None,
        "feedback",
        input={"trace_id": trace_id, "score": "down", "comment": "no", "tenant": TENANT},
    )
    assert "__error__" not in fed, fed
    assert fed["score"] == 0.0 and fed["feedback"][0]["by"] == "api"

    stats = await client.runs.wait(None, "stats", input={"tenant": TENANT, "playbook": "fin"})
    assert "__error__" not in stats, stats
    assert stats["overall"]["runs"] == 6 and stats["overall"]["feedback_runs"] == 1
    assert sorted(r["version"] for r in stats["by_version"]) == sorted(set(versions.values()))

    view = await client.runs.wait(
        None, "release", input={"subject": "playbook/fin", "action": "status", "tenant": TENANT}
    )
    arms = view["view"]["release"]["arms"]
    assert arms["production"]["runs"] + arms["canary"]["runs"] == 6
    assert arms["production"]["runs"] == sum(v == 1 for v in versions.values())
    ended = await client.runs.wait(
        None,
        "release",
        input={"subject": "playbook/fin", "action": "rollback", "by": "ops", "tenant": TENANT},
    )
    assert ended["view"]["release"]["decision"] == "rollback" and ended["view"]["canary"] is None
