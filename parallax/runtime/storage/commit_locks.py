"""Commit locks: what keeps two writers of one playbook from writing the same version.

`BaseStore` has no compare-and-swap, so a commit serialises its read-head -> write-version
-> write-head section with a `CommitLock`:
- `LocalLock`: a process-wide lock per name. Enough for one process, e.g. the in-memory
  store under `langgraph dev`, whatever threads or event loops call it.
- `FileCommitLock(path)`: that plus an OS file lock (`filelock`), for several processes on
  one machine sharing a SQLite file (the CLI uses PARALLAX_HOME/playbooks.lock).
Neither spans machines. Both are acquired by polling non-blocking attempts with
`asyncio.sleep` between them, so waiting never blocks the event loop and a cancelled
waiter leaves nothing held.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from parallax.runtime.storage.namespaces import StoreError

if TYPE_CHECKING:
    from filelock import FileLock


class CommitLock(Protocol):
    def hold(self, name: str) -> Any:
        """An async context manager that excludes other committers of playbook `name`."""


_REGISTRY_GUARD = threading.Lock()
_THREAD_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_FILE_LOCKS: dict[str, FileLock] = {}


def _thread_lock(key: tuple[str, str]) -> threading.Lock:
    """One lock per key for the whole process, shared by every thread and event loop."""
    with _REGISTRY_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())


async def _poll(try_once: Callable[[], bool], timeout: float, what: str) -> None:
    deadline, delay = time.monotonic() + timeout, 0.002
    while not try_once():
        if time.monotonic() >= deadline:
            raise StoreError(f"timed out after {timeout:g}s waiting for {what}: another writer holds it; retry when it is done")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


class LocalLock:
    """Process-local: excludes threads, tasks and event loops of this process only."""

    def __init__(self, timeout: float = 120.0) -> None:
        self.timeout = timeout

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        lock = _thread_lock(("local", name))
        await _poll(lambda: lock.acquire(blocking=False), self.timeout, f"the playbook lock for {name!r}")
        try:
            yield
        finally:
            lock.release()


class FileCommitLock:
    """Cross-process on one machine: an in-process lock first (a filelock object is reentrant
    within a process, so it cannot tell two threads apart), then the OS file lock."""

    def __init__(self, path: str | Path, timeout: float = 120.0) -> None:
        self.path = str(Path(path).resolve())
        self.timeout = timeout

    def _file_lock(self) -> FileLock:
        from filelock import FileLock

        with _REGISTRY_GUARD:
            if self.path not in _FILE_LOCKS:
                _FILE_LOCKS[self.path] = FileLock(self.path, thread_local=False)
            return _FILE_LOCKS[self.path]

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        from filelock import Timeout

        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        inner, flock = _thread_lock(("file", self.path)), self._file_lock()

        def try_file() -> bool:
            try:
                flock.acquire(blocking=False)
                return True
            except Timeout:
                return False

        await _poll(lambda: inner.acquire(blocking=False), self.timeout, f"the playbook lock {self.path}")
        try:
            await _poll(try_file, self.timeout, f"the playbook lock {self.path}")
            try:
                yield
            finally:
                flock.release()
        finally:
            inner.release()
