"""Once after imports: long-lived objects frozen, the young GC generation collected less often."""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation (CPython's default: 700)."""


def freeze_startup_objects() -> None:
    """Move everything allocated so far (imported modules, compiled graphs) out of GC's reach, and collect the
    youngest generation every YOUNG_THRESHOLD allocations instead of every 700.

    A wide fan-out allocates many short-lived objects; each full collection would
    otherwise walk the hundreds of thousands of long-lived objects that langchain,
    langgraph and pydantic create at import, which roughly doubled per-branch CPU in
    bench/fanout.py. Call once, after imports and before running a graph.

    Why the threshold: with a hundred branches in flight, each collection at 700 allocations found the
    branches' coroutines, tasks and finished records still alive, and walked them again and again as they
    moved up the generations: 0.1 ms of CPU per branch of a 1,000-vote run (a fifth of its CPU), against
    0.02 ms at 10,000. Garbage in reference cycles then waits at most 10,000 allocations for its collection
    (a few megabytes); everything else is freed as before, when its last reference goes.
    """
    gc.collect()
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), older, oldest)
