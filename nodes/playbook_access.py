"""The playbook store as graph nodes and CLI commands use it.

One place decides the commit lock: a file lock in PARALLAX_HOME, so two `parallax learn`
processes (or threads, or graph branches) committing to the same SQLite store never
lose an update. Under `langgraph dev` the in-memory store lives in one process, so an
in-process lock is enough. A multi-replica Postgres deployment needs an advisory lock
(see prompts/playbook_store.py).
"""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from parallax import settings as settings_mod
from prompts.playbook_store import FileCommitLock, LocalLock, PlaybookStore


def for_store(store: BaseStore) -> PlaybookStore:
    if isinstance(store, InMemoryStore):  # one process: no file to lock (and no blocking I/O in async nodes)
        return PlaybookStore(store, lock=LocalLock())
    return PlaybookStore(store, lock=FileCommitLock(settings_mod.load().home / "playbooks.lock"))


def playbook_store(runtime: Runtime) -> PlaybookStore:
    if runtime.store is None:
        raise RuntimeError("the learn graph needs a store: compile it with one (the CLI and langgraph dev do)")
    return for_store(runtime.store)
