"""Which store and which commit lock a caller gets.

See docs/internals/storage.md#commit-locks.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from parallax.runtime import settings as settings_mod
from parallax.runtime.startup import freeze_startup_objects
from parallax.runtime.storage.commit_locks import CommitLock, FileCommitLock, LocalLock
from parallax.runtime.storage.consumed import ConsumedStore
from parallax.runtime.storage.playbook_store import PlaybookStore
from parallax.runtime.storage.postgres import (
    PostgresCommitLock,
    open_postgres_store,
    postgres_url_of,
)
from parallax.runtime.storage.prompt_store import PromptStore
from parallax.runtime.storage.trace_store import TraceStore


def commit_lock() -> FileCommitLock:
    return _file_lock(settings_mod.load().home)


@functools.lru_cache(maxsize=16)
def _file_lock(home: Path) -> FileCommitLock:
    """One lock object per PARALLAX_HOME (a learn batch asks for it hundreds of times)."""
    return FileCommitLock(home / "playbooks.lock")


def _present(store: BaseStore | None) -> BaseStore:
    if store is None:
        raise RuntimeError(
            "this graph needs a store: compile it with one (the CLI and langgraph dev do)"
        )
    return store


def lock_for(store: BaseStore | None) -> CommitLock:
    """The commit lock writers of `store` share."""
    store = _present(store)
    if in_memory(store):  # one process: no file to lock (and no blocking I/O in async nodes)
        return LocalLock()
    settings = settings_mod.load()
    if (
        url := postgres_url_of(store, settings.database_url or os.environ.get("DATABASE_URL"))
    ) is not None:
        return PostgresCommitLock(url)
    return commit_lock()


def in_memory(store: BaseStore) -> bool:
    """An in-memory store, also when wrapped (`langgraph dev` hands nodes its in-memory store inside
    a batching store that keeps it as `_store`)."""
    current: object = store
    for _ in range(4):
        if isinstance(current, InMemoryStore):
            return True
        current = getattr(current, "_store", None)
    return False


def playbooks_in(store: BaseStore | None, tenant: str = "default") -> PlaybookStore:
    """The playbooks of one tenant in `store`; a bad tenant name raises StoreError."""
    store = _present(store)
    return PlaybookStore(store, lock=lock_for(store), tenant=tenant)


def prompts_in(store: BaseStore | None, tenant: str = "default") -> PromptStore:
    """The prompt versions of one tenant in `store` (runtime/storage/prompt_store.py)."""
    store = _present(store)
    return PromptStore(store, lock=lock_for(store), tenant=tenant)


def traces_in(store: BaseStore | None, tenant: str = "default") -> TraceStore:
    """The traces and dead letters of one tenant, with the lock feedback writes take."""
    store = _present(store)
    return TraceStore(store, tenant, lock=lock_for(store))


def consumed_in(store: BaseStore | None, tenant: str, playbook: str) -> ConsumedStore:
    """The runs a tenant's playbook has claimed or learned from (runtime/storage/consumed.py)."""
    store = _present(store)
    return ConsumedStore(store, lock_for(store), tenant, playbook)


BUSY_TIMEOUT_MS = 30_000
"""How long a statement waits for another process's write to the CLI's SQLite file (a `parallax
loop` round beside a `parallax run`, a learn batch writing a hundred traces) before it fails with
"database is locked"; sqlite3's default, 5 s, is shorter than one busy learn batch's writes on a
loaded machine."""


@asynccontextmanager
async def open_sqlite_store(path: Path | None = None) -> AsyncIterator[BaseStore]:
    """The CLI's store (default PARALLAX_HOME/store.sqlite), set up under the commit lock.

    Write-ahead logging, `synchronous=NORMAL`, each statement waiting up to BUSY_TIMEOUT_MS for
    another process's write (docs/internals/storage.md#calling-any-store).
    """
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    path = path or settings_mod.load().store_path
    path.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteStore.from_conn_string(str(path)) as store:
        await store.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        async with commit_lock().hold(
            "setup"
        ):  # the journal mode too: switching it waits for no other process
            await store.conn.execute("PRAGMA journal_mode=WAL")
            await store.setup()
        await store.conn.execute("PRAGMA synchronous=NORMAL")
        yield store


def cli_store_location() -> str:
    """Which store the CLI reads, for messages: the PostgreSQL database (host and name, no
    credentials) or the SQLite file, and how to pick another."""
    settings = settings_mod.load()
    if settings.database_url:
        return (
            f"the PostgreSQL store at {settings.database_url.split('@')[-1]}"
            " (PARALLAX_DATABASE_URL)"
        )
    how = "PARALLAX_HOME" if os.environ.get("PARALLAX_HOME") else "set PARALLAX_HOME to use another"
    return f"{settings.store_path.absolute()} ({how})"


def has_cli_store() -> bool:
    """Whether the CLI has a store to read: a database URL, or the SQLite file exists."""
    settings = settings_mod.load()
    return bool(settings.database_url) or settings.store_path.exists()


@asynccontextmanager
async def open_cli_store() -> AsyncIterator[BaseStore]:
    """The CLI's store: the deployment's PostgreSQL store with PARALLAX_DATABASE_URL (what the
    graph API's runs wrote, under the same tenant namespaces), else PARALLAX_HOME/store.sqlite."""
    url = settings_mod.load().database_url
    opened = open_postgres_store(url) if url else open_sqlite_store()
    async with opened as store:
        yield store


@asynccontextmanager
async def durable_graph(builder: Any) -> AsyncIterator[Any]:
    """`builder` compiled with SQLite checkpoints under PARALLAX_HOME and the CLI's store (SQLite
    there too, or the deployment's PostgreSQL store with PARALLAX_DATABASE_URL): what the CLI and
    the Python API run, so a run from either is resumable and its trace is found by `parallax
    trace`."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with (
        open_cli_store() as store,
        AsyncSqliteSaver.from_conn_string(str(settings_mod.load().checkpoint_path)) as saver,
    ):
        await saver.conn.execute(
            f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}"
        )  # runs of other processes write there too
        graph = builder.compile(checkpointer=saver, store=store)
        freeze_startup_objects()
        yield graph
