"""One limit on model calls in flight, shared by all tasks of a fan-out.

Why not LangGraph's `max_concurrency`: it gates everything the run submits, checkpoint
writes included, so with more tasks than slots a finished branch's result waits behind
queued branches before it is saved — and a crash then loses it (found by
tests/integration/test_resume_after_kill.py). Instead every task of a fan-out starts at
once, and their model calls share this semaphore, sized by `Context.max_concurrency`. The
fan-out names itself in its `Send` payloads (`new_fan_out`), and its tasks find the one
semaphore in the run's services (runtime/services.py) by that name.
"""

from __future__ import annotations

import asyncio

from parallax.runtime.services import Services


def fan_out_limit(services: Services, fan_out: str, size: int) -> asyncio.Semaphore:
    """The semaphore every task of fan-out `fan_out` shares."""
    return services.shared(fan_out, lambda: asyncio.Semaphore(size), "limit", size)
