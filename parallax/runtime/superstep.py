"""One limit on model calls in flight, shared by all tasks of a superstep.

Why not LangGraph's `max_concurrency`: it gates everything the run submits, checkpoint
writes included, so with more tasks than slots a finished branch's result waits behind
queued branches before it is saved — and a crash then loses it (found by
tests/integration/test_resume_after_kill.py). Instead every task of a fan-out starts at
once, and their model calls share this semaphore, sized by `Context.max_concurrency`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from langgraph.runtime import Runtime

_shared: weakref.WeakValueDictionary[tuple[object, ...], object] = weakref.WeakValueDictionary()
T = TypeVar("T")


def _where(runtime: Runtime[Any], key: tuple[object, ...]) -> tuple[object, ...]:
    info = runtime.execution_info
    # the namespace without the task id names the node (and its parents); the checkpoint
    # id names the superstep; so every task of this fan-out finds the same object
    where = (info.thread_id, info.checkpoint_ns.rsplit(":", 1)[0], info.checkpoint_id) if info else ()
    return (id(asyncio.get_running_loop()), *where, *key)


_held: dict[tuple[object, ...], object] = {}


def superstep_held(runtime: Runtime[Any], make: Callable[[], T], *key: object) -> tuple[T, Callable[[], None]]:
    """Like `superstep_shared`, but kept until `release()` is called, not just while a task holds it:
    for coordination where a task that starts late must still find what finished tasks left."""
    full = _where(runtime, key)
    if full not in _held:
        _held[full] = make()
    return _held[full], lambda: _held.pop(full, None)  # type: ignore[return-value]


def superstep_shared(runtime: Runtime[Any], make: Callable[[], T], *key: object) -> T:
    """One object per (run, superstep, `key`), shared by every task of a fan-out; it lives
    as long as some task holds it."""
    full = _where(runtime, key)
    found = _shared.get(full)
    if found is None:
        found = _shared[full] = make()
    return found  # type: ignore[return-value]


def superstep_limit(runtime: Runtime[Any], size: int) -> asyncio.Semaphore:
    """The semaphore of this run's current superstep (same checkpoint, same namespace)."""
    return superstep_shared(runtime, lambda: asyncio.Semaphore(size), "limit", size)
