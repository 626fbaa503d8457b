"""Once after imports: long-lived objects frozen, the young GC generation collected less often."""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation (CPython's default: 700)."""


def freeze_startup_objects() -> None:
    """Freeze what is allocated so far and collect the youngest generation less often.

    Call once, after imports and before running a graph: a wide fan-out's collections then skip the
    long-lived objects of the libraries (docs/internals/process.md#start-up-and-garbage-collection).
    """
    gc.collect()
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), older, oldest)
