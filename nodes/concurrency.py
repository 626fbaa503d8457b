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

from langgraph.runtime import Runtime

_limits: weakref.WeakValueDictionary[tuple, asyncio.Semaphore] = weakref.WeakValueDictionary()


def superstep_limit(runtime: Runtime, size: int) -> asyncio.Semaphore:
    """The semaphore of this run's current superstep (same checkpoint, same namespace)."""
    info = runtime.execution_info
    # the namespace without the task id names the node (and its parents); the checkpoint
    # id names the superstep; so every task of this fan-out finds the same semaphore
    key = (id(asyncio.get_running_loop()), info.thread_id, info.checkpoint_ns.rsplit(":", 1)[0],
           info.checkpoint_id, size) if info else (id(asyncio.get_running_loop()), size)
    limit = _limits.get(key)
    if limit is None:
        limit = _limits[key] = asyncio.Semaphore(size)
    return limit
