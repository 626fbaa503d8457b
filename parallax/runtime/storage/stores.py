"""Which store and which commit lock a caller gets.

One place decides the commit lock: a file lock in PARALLAX_HOME, so two `parallax learn`
processes (or threads, or graph branches) committing to the same SQLite store never lose
an update. Under `langgraph dev` the in-memory store lives in one process, so an
in-process lock is enough. The CLI's own store is PARALLAX_HOME/store.sqlite.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from parallax.runtime import settings as settings_mod
from parallax.runtime.storage.commit_locks import FileCommitLock, LocalLock
from parallax.runtime.storage.playbook_store import PlaybookStore
from parallax.runtime.storage.prompt_store import PromptStore
from parallax.runtime.storage.trace_store import TraceStore


def commit_lock() -> FileCommitLock:
    return _file_lock(settings_mod.load().home)


@functools.lru_cache(maxsize=16)
def _file_lock(home: Path) -> FileCommitLock:
    """One lock object per PARALLAX_HOME (a learn batch asks for it hundreds of times)."""
    return FileCommitLock(home / "playbooks.lock")


def lock_for(store: BaseStore | None) -> LocalLock | FileCommitLock:
    """The commit lock writers of `store` share."""
    if store is None:
        raise RuntimeError("this graph needs a store: compile it with one (the CLI and langgraph dev do)")
    if in_memory(store):  # one process: no file to lock (and no blocking I/O in async nodes)
        return LocalLock()
    return commit_lock()


def in_memory(store: BaseStore) -> bool:
    """An in-memory store, also when wrapped (`langgraph dev` hands nodes its in-memory store inside a
    batching store that keeps it as `_store`)."""
    for _ in range(4):
        if isinstance(store, InMemoryStore):
            return True
        store = getattr(store, "_store", None)
    return False


def playbooks_in(store: BaseStore | None, tenant: str = "default") -> PlaybookStore:
    """The playbooks of one tenant in `store`; a bad tenant name raises StoreError."""
    return PlaybookStore(store, lock=lock_for(store), tenant=tenant)


def prompts_in(store: BaseStore | None, tenant: str = "default") -> PromptStore:
    """The prompt versions of one tenant in `store` (runtime/storage/prompt_store.py)."""
    return PromptStore(store, lock=lock_for(store), tenant=tenant)


def traces_in(store: BaseStore | None, tenant: str = "default") -> TraceStore:
    """The traces and dead letters of one tenant, with the lock feedback writes take."""
    return TraceStore(store, tenant, lock=lock_for(store))


@asynccontextmanager
async def open_sqlite_store(path: Path | None = None) -> AsyncIterator[BaseStore]:
    """The CLI's store (default PARALLAX_HOME/store.sqlite), set up under the commit lock (two
    processes migrating a fresh file at once would collide).

    Write-ahead logging with `synchronous=NORMAL`: every run writes its trace, and a learn batch
    writes a hundred at once; with SQLite's default rollback journal each write is an fsync'd
    commit that the next one queues behind. A commit in WAL mode survives a crash of the
    process (a power cut may lose the last ones), and readers never block the writer.
    """
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    path = path or settings_mod.load().store_path
    path.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteStore.from_conn_string(str(path)) as store:
        await store.conn.execute("PRAGMA journal_mode=WAL")
        await store.conn.execute("PRAGMA synchronous=NORMAL")
        async with commit_lock().hold("setup"):
            await store.setup()
        yield store
