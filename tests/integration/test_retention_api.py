"""Data that expires through the API (docs/retention.md), on two replicas of `parallax serve`, with
langgraph-sdk: threads' `ttl` on create and update swept by Aegra's own sweeper once across
replicas, `POST /threads/prune` within the caller's tenant, and store items' `ttl` / `refresh_ttl`
swept once, counted on /metrics.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from testkit.aegra_cluster import config_with, sql, two_replicas
from testkit.fault_server import default_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta"}
SWEEP_S = 2
ENV = {"PARALLAX_THREAD_TTL_SWEEP_S": str(SWEEP_S), "PARALLAX_MAX_TOKENS": "64"}
STORE_TTL = {"default_ttl": 1, "sweep_interval_minutes": SWEEP_S / 60}
THREAD_TTL_MIN = 0.1  # 6 s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("retention")
    config = config_with(work / "config", {})
    served = json.loads(config.read_text())
    served["store"]["ttl"] = STORE_TTL  # LangGraph Platform's `store.ttl`, in the served aegra.json
    config.write_text(json.dumps(served))
    with two_replicas(work, default_reply, KEYS, 20, ENV, config=config) as running:
        yield running


def client(replica, tenant: str = "acme"):
    return get_client(url=replica.url, api_key=KEYS[tenant])


async def metric(replicas, series: str) -> list[float]:
    """The value of `series` (name and labels as printed) on each replica's /metrics (0 when
    absent)."""
    values = []
    async with httpx.AsyncClient(trust_env=False) as h:
        for replica in replicas:
            text = (await h.get(f"{replica.url}/metrics")).text
            values.append(
                sum(
                    float(line.rpartition(" ")[2])
                    for line in text.splitlines()
                    if line.startswith(series)
                )
            )
    return values


async def exists(sdk, thread_id: str) -> bool:
    try:
        await sdk.threads.get(thread_id)
    except NotFoundError:
        return False
    return True


def test_threads_with_a_ttl_are_gone_after_it_on_both_replicas_swept_once(cluster):
    a, b = cluster.live()

    async def scenario() -> dict:
        sdk_a, sdk_b = client(a), client(b)
        swept_before = sum(
            await metric((a, b), 'aegra_thread_ttl_swept_threads_total{outcome="deleted"}')
        )
        created = (await sdk_a.threads.create(ttl=THREAD_TTL_MIN))[
            "thread_id"
        ]  # {"ttl": 0.1, "strategy": "delete"}
        updated = (await sdk_a.threads.create())["thread_id"]
        kept = (await sdk_a.threads.create())["thread_id"]
        await sdk_b.threads.update(
            updated, metadata={"topic": "x"}, ttl=THREAD_TTL_MIN
        )  # on the other replica
        started = time.monotonic()
        rows = dict(
            sql(
                cluster,
                "SELECT thread_id, ttl_minutes FROM thread_ttl WHERE thread_id = ANY(%s)",
                [created, updated, kept],
            )
        )
        assert rows[created] == rows[updated] == THREAD_TTL_MIN
        assert rows[kept] >= 1e9  # a thread without a ttl is kept (Aegra's largest, ~1,900 years)
        assert (await sdk_a.threads.get(updated))["metadata"][
            "topic"
        ] == "x"  # the update's metadata too
        for sdk in (sdk_a, sdk_b):  # there before the ttl
            assert await exists(sdk, created) and await exists(sdk, updated)
        gone_at: dict[str, float] = {}
        while len(gone_at) < 2 and time.monotonic() - started < 60:
            for thread_id in (created, updated):
                if (
                    thread_id not in gone_at
                    and not await exists(sdk_a, thread_id)
                    and not await exists(sdk_b, thread_id)
                ):
                    gone_at[thread_id] = time.monotonic() - started
            await asyncio.sleep(0.5)
        await asyncio.sleep(2 * SWEEP_S)  # both replicas swept again meanwhile
        swept = await metric((a, b), 'aegra_thread_ttl_swept_threads_total{outcome="deleted"}')
        return {
            "gone_at": gone_at,
            "swept": sum(swept) - swept_before,
            "per_replica": swept,
            "kept": await exists(sdk_b, kept),
        }

    seen = asyncio.run(scenario())
    print("thread ttl:", seen)
    assert len(seen["gone_at"]) == 2, seen
    assert all(
        THREAD_TTL_MIN * 60 - 1 <= s <= THREAD_TTL_MIN * 60 + 3 * SWEEP_S + 5
        for s in seen["gone_at"].values()
    )
    assert seen["swept"] == 2  # each thread deleted once, by one replica or the other
    assert seen["kept"]


def test_prune_deletes_or_compacts_the_callers_threads_only(cluster):
    a, b = cluster.live()

    async def scenario() -> dict:
        acme, beta = client(a), client(b, "beta")
        mine = [(await acme.threads.create())["thread_id"] for _ in range(3)]
        theirs = (await beta.threads.create())["thread_id"]
        pruned = await client(b).threads.prune([mine[0], mine[1], theirs, "no-such-thread"])
        history = mine[2]
        for text in ("first", "second"):
            await acme.runs.wait(
                history, "chat", input={"messages": [{"type": "human", "content": text}]}
            )
        before = sql(cluster, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", history)[0][
            0
        ]
        state = (await acme.threads.get_state(history))["values"]
        compacted = await acme.threads.prune([history], strategy="keep_latest")
        after = sql(
            cluster,
            "SELECT checkpoint_ns, count(*) FROM checkpoints WHERE thread_id = %s GROUP BY 1",
            history,
        )
        refused = {}
        async with httpx.AsyncClient(trust_env=False, headers={"x-api-key": KEYS["acme"]}) as h:
            for name, body in {
                "too_many": {"thread_ids": [f"t{i}" for i in range(1001)]},
                "unknown_field": {"thread_ids": [], "older_than": 5},
                "no_ids": {},
                "bad_strategy": {"thread_ids": [], "strategy": "all"},
            }.items():
                answer = await h.post(f"{a.url}/threads/prune", json=body)
                refused[name] = (answer.status_code, answer.json()["message"])
            for name, body in {
                "patch_ttl_zero": {"ttl": {"ttl": 0}},
                "patch_unknown": {"status": "idle"},
            }.items():
                answer = await h.patch(f"{a.url}/threads/{history}", json=body)
                refused[name] = (answer.status_code, answer.json()["message"])
            aegras = await h.post(
                f"{a.url}/threads/prune"
            )  # Aegra's own call, no body: expired threads now
            refused["aegra"] = (aegras.status_code, aegras.json())
        return {
            "pruned": pruned,
            "left": [await exists(acme, t) for t in mine],
            "theirs": await exists(beta, theirs),
            "compacted": compacted,
            "before": before,
            "after": after,
            "refused": refused,
            "same_state": (await acme.threads.get_state(history))["values"] == state,
        }

    seen = asyncio.run(scenario())
    print("prune:", seen)
    assert seen["pruned"] == {
        "pruned_count": 2
    }  # another tenant's id and an unknown one: skipped, not counted
    assert seen["left"] == [False, False, True] and seen["theirs"]
    assert seen["compacted"] == {"pruned_count": 1} and seen["before"] > 2
    assert all(count == 1 for _ns, count in seen["after"]) and seen["same_state"]
    assert seen["refused"].pop("aegra") == (200, {"deleted": 0, "pruned": 0})
    assert {name: code for name, (code, _) in seen["refused"].items()} == dict.fromkeys(
        seen["refused"], 422
    )
    assert (
        "thread_ids" in seen["refused"]["too_many"][1] and "1000" in seen["refused"]["too_many"][1]
    )
    assert "older_than" in seen["refused"]["unknown_field"][1]
    assert "ttl.ttl: Input should be greater than 0" in seen["refused"]["patch_ttl_zero"][1]
    assert "status: Extra inputs are not permitted" in seen["refused"]["patch_unknown"][1]


def test_store_items_expire_after_their_ttl_refreshed_on_read_swept_once(cluster):
    a, b = cluster.live()

    def expiry(key: str, prefix: str = "users.acme.notes") -> float:
        return sql(
            cluster,
            "SELECT extract(epoch FROM expires_at) FROM store WHERE prefix = %s AND key = %s",
            prefix,
            key,
        )[0][0]

    async def scenario() -> dict:
        acme, beta = client(a), client(b, "beta")
        swept_before = sum(await metric((a, b), 'parallax_swept_total{kind="store_items"}'))
        await acme.store.put_item(["notes"], "short", {"v": 1}, ttl=1)
        await acme.store.put_item(["notes"], "default", {"v": 2})  # store.ttl default_ttl: 1 minute
        await acme.store.put_item(["notes"], "long", {"v": 3}, ttl=600)
        await beta.store.put_item(
            ["notes"], "short", {"v": 4}, ttl=600
        )  # the same name, another tenant's
        first = expiry("short")
        await asyncio.sleep(1.5)
        await client(b).store.get_item(["notes"], "short", refresh_ttl=False)
        unrefreshed = expiry("short")
        await client(b).store.get_item(["notes"], "short", refresh_ttl=True)
        refreshed = expiry("short")
        found = await acme.store.search_items(["notes"], refresh_ttl=False)
        refused = {}
        async with httpx.AsyncClient(trust_env=False, headers={"x-api-key": KEYS["acme"]}) as h:
            for name, ttl in {"fraction": 0.5, "zero": 0, "negative": -1}.items():
                answer = await h.put(
                    f"{a.url}/store/items",
                    json={"namespace": ["notes"], "key": name, "value": {}, "ttl": ttl},
                )
                refused[name] = answer.status_code
        started = time.monotonic()
        gone: dict[str, float] = {}
        while len(gone) < 2 and time.monotonic() - started < 120:
            for key in ("short", "default"):
                if (
                    key not in gone
                    and await acme.store.get_item(["notes"], key, refresh_ttl=False) is None
                ):
                    gone[key] = time.monotonic() - started
            await asyncio.sleep(1)
        await asyncio.sleep(2 * SWEEP_S)
        swept = await metric((a, b), 'parallax_swept_total{kind="store_items"}')
        return {
            "refresh": (unrefreshed - first, refreshed - first),
            "found": len(found["items"]),
            "gone": gone,
            "refused": refused,
            "swept": sum(swept) - swept_before,
            "per_replica": swept,
            "long": await acme.store.get_item(["notes"], "long"),
            "beta": await beta.store.get_item(["notes"], "short"),
        }

    seen = asyncio.run(scenario())
    print("store ttl:", seen)
    assert (
        seen["refresh"][0] == 0 and seen["refresh"][1] >= 1.4
    )  # refresh_ttl=False left it; True moved it on
    assert seen["found"] == 3
    assert set(seen["gone"]) == {"short", "default"} and all(
        s <= 60 + 3 * SWEEP_S + 5 for s in seen["gone"].values()
    )
    assert seen["refused"] == {"fraction": 422, "zero": 422, "negative": 422}
    assert seen["swept"] == 2  # each expired item deleted once, by one replica or the other
    assert seen["long"]["value"] == {"v": 3} and seen["beta"]["value"] == {"v": 4}


def test_both_replicas_sweep_and_each_row_is_counted_once(cluster):
    """Rounds of threads and store items that expire at once, until each replica has swept some of
    both: the replicas' counts add up to what expired, never more."""
    a, b = cluster.live()
    thread_series, store_series = (
        'aegra_thread_ttl_swept_threads_total{outcome="deleted"}',
        'parallax_swept_total{kind="store_items"}',
    )

    async def scenario() -> dict:
        sdk = client(a)
        before = {s: await metric((a, b), s) for s in (thread_series, store_series)}
        threads = items = rounds = 0
        while rounds < 10:
            rounds += 1
            for _ in range(10):
                await sdk.threads.create(ttl=0.01)  # 0.6 s
            threads += 10
            sql(
                cluster,
                "INSERT INTO store (prefix, key, value, expires_at, ttl_minutes) SELECT"
                " 'users.acme.sweep', 'r' || %s || '-' || g, '{}', now() - interval '1 second', 1"
                " FROM generate_series(1, 200) g",
                rounds,
            )
            items += 200
            await asyncio.sleep(2 * SWEEP_S + 1)
            now = {
                s: [x - y for x, y in zip(await metric((a, b), s), before[s], strict=True)]
                for s in (thread_series, store_series)
            }
            if all(min(counts) > 0 for counts in now.values()):
                break
        await asyncio.sleep(2 * SWEEP_S)
        now = {
            s: [x - y for x, y in zip(await metric((a, b), s), before[s], strict=True)]
            for s in (thread_series, store_series)
        }
        left = sql(cluster, "SELECT count(*) FROM store WHERE prefix = 'users.acme.sweep'")[0][0]
        return {
            "rounds": rounds,
            "threads": threads,
            "items": items,
            "counted": now,
            "items_left": left,
        }

    seen = asyncio.run(scenario())
    print("both replicas:", seen)
    assert sum(seen["counted"][thread_series]) == seen["threads"]
    assert sum(seen["counted"][store_series]) == seen["items"] and seen["items_left"] == 0
    assert all(
        min(counts) > 0 for counts in seen["counted"].values()
    )  # each replica swept some of each
