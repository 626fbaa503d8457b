"""The versioned playbook store: versions, diff, rollback, export/import, paging, and no lost update
with concurrent committers (threads on one SQLite file; separate processes:
tests/integration/test_store_processes.py).
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from parallax.runtime.storage.commit_locks import FileCommitLock
from parallax.runtime.storage.namespaces import StoreError
from parallax.runtime.storage.playbook_files import parse_playbook
from parallax.runtime.storage.playbook_store import CommitVoided, PlaybookStore
from parallax.state.playbook import Operation, item_id_for


def add(text: str, section: str = "general", **kw) -> Operation:
    return Operation(op="add", text=text, section=section, **kw)


async def three_versions(ps: PlaybookStore) -> list:
    v1 = await ps.commit(
        "default",
        0,
        [add("Net margin = net income / revenue."), add("Round to 2 decimals.", "format")],
        "learn-1",
        {"val_accuracy_after": 0.4},
    )
    a, b = v1.items[0].id, v1.items[1].id
    v2 = await ps.commit(
        "default",
        1,
        [Operation(op="tag_helpful", item_id=a, count=2), add("Read the table header.")],
        "learn-2",
        {"val_accuracy_after": 0.5},
    )
    v3 = await ps.commit(
        "default",
        2,
        [
            Operation(op="archive", item_id=b),
            Operation(op="update", item_id=a, text="Net margin is net income over revenue."),
        ],
        "learn-3",
        {"val_accuracy_after": 0.55},
    )
    return [v1, v2, v3]


async def test_versions_parents_head_and_get():
    ps = PlaybookStore(InMemoryStore())
    assert (await ps.head("default")).version == 0 and (await ps.head("default")).items == []
    v1, v2, v3 = await three_versions(ps)
    assert [(v.version, v.parent) for v in (v1, v2, v3)] == [(1, 0), (2, 1), (3, 2)]
    head = await ps.head("default")
    assert head == v3
    assert [i.text for i in head.active] == [
        "Net margin is net income over revenue.",
        "Read the table header.",
    ]
    assert (
        await ps.get("default", 1)
    ).items == v1.items  # immutable: later commits did not touch v1
    assert v1.items[0].helpful == 0 and v2.items[0].helpful == 2
    assert [v.version for v in await ps.history("default")] == [1, 2, 3]
    assert (await ps.history("default"))[1].created_by == "learn-2"
    assert await ps.names() == ["default"]
    # the solve graph reads the raw head record
    raw = (await ps.store.aget(("playbooks", "default", "default"), "head")).value
    assert raw["version"] == 3 and {"id", "text", "status"} <= set(raw["items"][0])


async def test_diff_reports_added_changed_archived():
    ps = PlaybookStore(InMemoryStore())
    v1, v2, v3 = await three_versions(ps)
    a, b = v1.items[0].id, v1.items[1].id
    d = await ps.diff("default", 1, 3)
    assert [i["text"] for i in d["added"]] == ["Read the table header."]
    assert [i["id"] for i in d["archived"]] == [b]
    assert d["changed"] == [
        {
            "id": a,
            "fields": ["text", "helpful"],
            "before": {"text": "Net margin = net income / revenue.", "helpful": 0},
            "after": {"text": "Net margin is net income over revenue.", "helpful": 2},
        }
    ]
    assert (await ps.diff("default", 3, 3)) == {
        "playbook": "default",
        "from": 3,
        "to": 3,
        "added": [],
        "changed": [],
        "archived": [],
    }
    back = await ps.diff("default", 3, 0)
    assert (
        back["added"] == [] and len(back["archived"]) == 2
    )  # both active items are gone in the empty v0


async def test_rollback_creates_next_version_equal_to_target():
    ps = PlaybookStore(InMemoryStore())
    v1, _, v3 = await three_versions(ps)
    v4 = await ps.rollback("default", 1, "alice")
    assert (v4.version, v4.parent, v4.note, v4.operations) == (4, 3, "rollback to v1", [])
    assert v4.items == v1.items
    assert (await ps.head("default")).items == v1.items
    assert [v.version for v in await ps.history("default")] == [1, 2, 3, 4]
    assert (await ps.get("default", 3)).items == v3.items  # history keeps everything


async def test_unknown_version_and_playbook_errors_say_how_to_fix():
    ps = PlaybookStore(InMemoryStore())
    await three_versions(ps)
    with pytest.raises(StoreError) as exc:
        await ps.get("default", 7)
    assert (
        str(exc.value) == "playbook 'default' has no version 7 (latest is 3): "
        "see `parallax playbook history --playbook default`"
    )
    with pytest.raises(
        StoreError, match=r"playbook 'nope' has no versions yet \(playbooks with data: default\)"
    ):
        await ps.diff("nope", 0, 1)
    with pytest.raises(StoreError, match="no version 9"):
        await ps.rollback("default", 9, "x")
    with pytest.raises(StoreError, match="no version 5 .latest is 3.: commit against"):
        await ps.commit("default", 5, [add("x")], "x")
    with pytest.raises(StoreError, match="bad playbook name"):
        await ps.head("a.b")
    assert len(await ps.history("default")) == 3  # failed writes wrote nothing


async def test_stale_base_is_reapplied_on_new_head_and_says_so():
    ps = PlaybookStore(InMemoryStore())
    await ps.commit("default", 0, [add("first")], "w1", {"val_accuracy": 0.5})
    v2 = await ps.commit(
        "default",
        0,
        [add("second"), add("first", provenance=["r9"])],
        "w2",
        {"val_accuracy": 0.6},
        note="batch 2",
    )
    assert (v2.version, v2.parent) == (2, 1)
    assert [i.text for i in v2.items] == ["first", "second"]
    assert v2.items[0].provenance == ["r9"]  # the duplicate add folded into the existing item
    assert v2.gate == {"val_accuracy": 0.6, "rebased_from": 0}
    assert v2.note == "batch 2; re-applied on v1 (read v0)"


async def test_history_pages_beyond_ten_versions():
    for page_size in (4, 100):
        ps = PlaybookStore(InMemoryStore(), page_size=page_size)
        for n in range(15):
            await ps.commit("default", n, [add(f"lesson {n}")], f"run-{n}")
        await ps.reject("default", 15, [add("bad")], "run-x", {}, "worse")
        history = await ps.history("default")
        assert [v.version for v in history] == list(range(1, 16))
        assert [v.parent for v in history] == list(range(0, 15))
        assert len(history[-1].active) == 15


async def test_history_pages_on_sqlite(tmp_path):
    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "s.sqlite")) as store:
        await store.setup()
        ps = PlaybookStore(store, page_size=4)
        for n in range(15):
            await ps.commit("default", n, [add(f"lesson {n}")], f"run-{n}")
        assert [v.version for v in await ps.history("default")] == list(range(1, 16))


async def test_reject_keeps_candidate_and_head_stays():
    ps = PlaybookStore(InMemoryStore())
    await three_versions(ps)
    cid = await ps.reject(
        "default",
        3,
        [add("Always answer 42.")],
        "learn-4",
        {"val_accuracy_after": 0.2},
        "accuracy fell 0.55 -> 0.20",
    )
    assert (await ps.head("default")).version == 3
    [cand] = await ps.candidates("default")
    assert (cand.candidate_id, cand.accepted, cand.reason, cand.parent, cand.version) == (
        cid,
        False,
        "accuracy fell 0.55 -> 0.20",
        3,
        4,
    )
    assert "Always answer 42." in [i.text for i in cand.active]
    assert [v.version for v in await ps.history("default")] == [1, 2, 3]


async def test_a_settled_key_is_either_committed_or_refused_for_good():
    ps = PlaybookStore(InMemoryStore())
    await ps.commit("default", 0, [add("Kept.")], "learn-a", key="learn-a-b0")
    assert await ps.settle("default", "learn-a-b0") is True  # committed: stays so
    assert await ps.settle("default", "learn-b-b0") is False  # not committed: given up
    with pytest.raises(CommitVoided, match="learn-b-b0"):
        await ps.commit("default", 1, [add("Late.")], "learn-b", key="learn-b-b0")
    with pytest.raises(CommitVoided):
        await ps.reject("default", 1, [add("Late.")], "learn-b", {}, "worse", key="learn-b-b0")
    assert (await ps.head("default")).version == 1 and await ps.candidates("default") == []
    assert not await ps.committed("default", "learn-b-b0")
    again = await ps.commit(
        "default", 0, [add("Kept.")], "learn-a", key="learn-a-b0"
    )  # idempotent as before
    assert again.version == 1


@pytest.mark.parametrize("fmt", ["json", "markdown"])
async def test_export_import_round_trip(fmt):
    ps = PlaybookStore(InMemoryStore())
    await three_versions(ps)
    await ps.commit(
        "default",
        3,
        [add("Two lines:\nthen this one", "multi line", about=["EBITDA"], provenance=["r1", "t2"])],
        "learn-4",
    )
    src = await ps.head("default")
    assert any(i.status == "archived" for i in src.items)
    text = await ps.export("default", fmt=fmt)
    other = PlaybookStore(InMemoryStore())
    imported = await other.import_("copy", text, "bob")
    assert imported.items == src.items
    assert (imported.version, imported.parent, imported.created_by) == (1, 0, "bob")
    assert (
        await other.export("copy", fmt=fmt) != "" and (await other.head("copy")).items == src.items
    )
    again = await ps.import_(
        "default", text, "bob"
    )  # importing into the same playbook: a new version
    assert again.version == 5 and again.items == src.items


def test_markdown_format_is_readable_and_hand_editable():
    ps = PlaybookStore(InMemoryStore())
    md = asyncio.run(ps.export("default", fmt="markdown"))
    assert md.startswith("# Playbook `default`, version 0")
    items = parse_playbook(
        "# mine\n\n## formulas\n\n- Gross margin = (revenue - COGS) / revenue.\n- Second\n  line\n"
    )
    assert [(i.section, i.text, i.helpful) for i in items] == [
        ("formulas", "Gross margin = (revenue - COGS) / revenue.", 0),
        ("formulas", "Second\nline", 0),
    ]
    assert items[0].id == item_id_for("Gross margin = (revenue - COGS) / revenue.", "formulas")
    with pytest.raises(StoreError, match="neither JSON nor"):
        parse_playbook("hello")
    with pytest.raises(StoreError, match="appears twice"):
        parse_playbook(json.dumps({"items": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}))
    with pytest.raises(StoreError, match="item 1: text: Field required"):
        parse_playbook(json.dumps([{"id": "a"}]))


def test_sync_only_sqlite_store_works_through_threads(tmp_path):
    with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite")) as store:
        store.setup()
        ps = PlaybookStore(store)
        v1 = asyncio.run(ps.commit("default", 0, [add("x")], "me"))
        assert asyncio.run(ps.head("default")) == v1


def check_linear(history, n: int, texts: set[str]) -> None:
    assert [v.version for v in history] == list(range(1, n + 1))
    assert [v.parent for v in history] == list(range(0, n))
    assert {i.text for i in history[-1].active} == texts
    assert (
        sum("rebased_from" in v.gate for v in history) == n - 1
    )  # everyone but the first read a stale head


def test_threads_committing_at_once_lose_nothing(tmp_path):
    db, lock_path, n = tmp_path / "store.sqlite", tmp_path / "playbooks.lock", 8
    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
    barrier, errors = threading.Barrier(n), []

    def writer(k: int) -> None:
        try:
            with SqliteStore.from_conn_string(str(db)) as store:
                ps = PlaybookStore(store, lock=FileCommitLock(lock_path))
                barrier.wait()
                asyncio.run(ps.commit("default", 0, [add(f"thread lesson {k}")], f"thread-{k}"))
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(n)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert errors == []
    with SqliteStore.from_conn_string(str(db)) as store:
        history = asyncio.run(PlaybookStore(store).history("default"))
    check_linear(history, n, {f"thread lesson {k}" for k in range(n)})
