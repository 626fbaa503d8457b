"""Several real processes on one SQLite store: commits of one playbook and trials of one release,
counted from each process at once, lose nothing (the file commit lock and the store's own writes
across processes).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from langgraph.store.sqlite import SqliteStore

from parallax.logic.release_decision import Rule
from parallax.logic.releases import start_release
from parallax.runtime.storage.playbook_store import PlaybookStore
from parallax.runtime.storage.stores import open_sqlite_store, playbooks_in
from tests.unit.test_gray_release import two_versions
from tests.unit.test_playbook_store import check_linear

ROOT = Path(__file__).resolve().parents[2]


WRITER = textwrap.dedent("""
    import asyncio, sys, time
    from pathlib import Path
    from langgraph.store.sqlite.aio import AsyncSqliteStore
    from parallax.runtime.storage.commit_locks import FileCommitLock
    from parallax.runtime.storage.playbook_store import CommitVoided, PlaybookStore
    from parallax.state.playbook import Operation

    db, lock, go, k = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]

    async def main():
        async with AsyncSqliteStore.from_conn_string(db) as store:
            await store.setup()
            ps = PlaybookStore(store, lock=FileCommitLock(lock))
            (go.parent / f"ready-{k}").touch()
            while not go.exists():
                time.sleep(0.005)
            await ps.commit(
                "default", 0, [Operation(op="add", text=f"process lesson {k}")], f"proc-{k}"
            )

    asyncio.run(main())
""")


def test_processes_committing_at_once_lose_nothing(tmp_path):
    db, lock_path, go, n = (
        tmp_path / "store.sqlite",
        tmp_path / "playbooks.lock",
        tmp_path / "go",
        4,
    )
    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(lock_path), str(go), str(k)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(n)
    ]
    deadline = (
        time.monotonic() + 120
    )  # wait until every process has imported and opened the store ...
    while (
        len(list(tmp_path.glob("ready-*"))) < n
        and time.monotonic() < deadline
        and all(p.poll() is None for p in procs)
    ):
        time.sleep(0.05)
    go.touch()  # ... then release them together
    for p in procs:
        _, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
    with SqliteStore.from_conn_string(str(db)) as store:
        history = asyncio.run(PlaybookStore(store).history("default"))
    check_linear(history, n, {f"process lesson {k}" for k in range(n)})
    assert sorted(v.created_by for v in history) == [f"proc-{k}" for k in range(n)]


COUNTER = """
import asyncio, sys
from parallax.logic.releases import count_trial
from parallax.runtime.storage.stores import open_sqlite_store, playbooks_in

async def main():
    async with open_sqlite_store() as store:
        labels = playbooks_in(store).labels("fin")
        for _ in range(10):
            await count_trial(labels, sys.argv[1], sys.argv[2], 1, 1)

asyncio.run(main())
"""


def test_processes_counting_at_once_on_the_cli_store_lose_no_trial():
    async def start():
        async with open_sqlite_store() as store:
            await two_versions(store)
            return await start_release(
                playbooks_in(store).labels("fin"), 2, 50, "a", "", Rule(), True, production=1
            )

    release = asyncio.run(start())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [
        subprocess.Popen([sys.executable, "-c", COUNTER, release["id"], arm], env=env, cwd=ROOT)
        for arm in ("canary", "production", "canary", "production")
    ]
    assert [c.wait(timeout=120) for c in children] == [0, 0, 0, 0]

    async def arms():
        async with open_sqlite_store() as store:
            return (await playbooks_in(store).labels("fin").get())["release"]["arms"]

    assert asyncio.run(arms()) == {
        "canary": {"runs": 20, "successes": 20},
        "production": {"runs": 20, "successes": 20},
    }
