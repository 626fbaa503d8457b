"""The playbook store as graph nodes and CLI commands use it.

One place decides the commit lock: a file lock in PARALLAX_HOME, so two `parallax learn`
processes (or threads, or graph branches) committing to the same SQLite store never
lose an update. Under `langgraph dev` the in-memory store lives in one process, so an
in-process lock is enough. A multi-replica Postgres deployment needs an advisory lock
(see prompts/playbook_store.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from parallax import settings as settings_mod
from prompts.playbook_store import FileCommitLock, LocalLock, PlaybookStore


def commit_lock() -> FileCommitLock:
    return FileCommitLock(settings_mod.load().home / "playbooks.lock")


def for_store(store: BaseStore, tenant: str = "default") -> PlaybookStore:
    """The playbooks of one tenant in `store`; a bad tenant name raises PlaybookError."""
    if isinstance(store, InMemoryStore):  # one process: no file to lock (and no blocking I/O in async nodes)
        return PlaybookStore(store, lock=LocalLock(), tenant=tenant)
    return PlaybookStore(store, lock=commit_lock(), tenant=tenant)


@asynccontextmanager
async def open_sqlite_store() -> AsyncIterator[BaseStore]:
    """The CLI's store, PARALLAX_HOME/store.sqlite, set up under the commit lock
    (two processes migrating a fresh file at once would collide)."""
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    settings = settings_mod.load()
    settings.home.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteStore.from_conn_string(str(settings.store_path)) as store:
        async with commit_lock().hold("setup"):
            await store.setup()
        yield store


def playbook_store(runtime: Runtime, tenant: str) -> PlaybookStore:
    if runtime.store is None:
        raise RuntimeError("the learn graph needs a store: compile it with one (the CLI and langgraph dev do)")
    return for_store(runtime.store, tenant)
