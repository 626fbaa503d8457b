"""Commit locks: what keeps two writers of one playbook from writing the same version.

`LocalLock` within a process, `FileCommitLock` across processes sharing a SQLite file.
See docs/internals/storage.md#commit-locks.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from parallax.runtime.storage.namespaces import StoreError


class CommitLock(Protocol):
    def hold(self, name: str) -> Any:
        """An async context manager that excludes other committers of playbook `name`."""


_REGISTRY_GUARD = threading.Lock()
_THREAD_LOCKS: dict[tuple[str, str], threading.Lock] = {}


def _thread_lock(key: tuple[str, str]) -> threading.Lock:
    """One lock per key for the whole process, shared by every thread and event loop."""
    with _REGISTRY_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())


async def _poll(try_once: Callable[[], bool], timeout: float, what: str) -> None:
    deadline, delay = time.monotonic() + timeout, 0.002
    while not try_once():
        if time.monotonic() >= deadline:
            raise StoreError(
                f"timed out after {timeout:g}s waiting for {what}: another writer holds it; retry"
                " when it is done"
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


class LocalLock:
    """Process-local: excludes threads, tasks and event loops of this process only."""

    def __init__(self, timeout: float = 120.0) -> None:
        self.timeout = timeout

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        lock = _thread_lock(("local", name))
        await _poll(
            lambda: lock.acquire(blocking=False), self.timeout, f"the playbook lock for {name!r}"
        )
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

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        from filelock import AsyncFileLock, Timeout

        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        inner = _thread_lock(("file", self.path))
        await _poll(
            lambda: inner.acquire(blocking=False), self.timeout, f"the playbook lock {self.path}"
        )
        try:
            # one holder in this process at a time (the inner lock), so a lock object of its own is
            # enough; its attempts are non-blocking calls on the loop (no executor thread that could
            # still win the lock after a cancelled wait), with asyncio sleeps between them
            flock = AsyncFileLock(
                self.path, timeout=self.timeout, thread_local=False, run_in_executor=False
            )
            try:
                await flock.acquire()
            except Timeout:
                raise StoreError(
                    f"timed out after {self.timeout:g}s waiting for the playbook lock {self.path}: "
                    "another writer holds it; retry when it is done"
                ) from None
            try:
                yield
            finally:
                await flock.release()
        finally:
            inner.release()
