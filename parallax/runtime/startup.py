"""What a process does once, after its imports and before its first graph run: take the long-lived objects out of
the garbage collector's way."""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Move everything allocated so far (imported modules, compiled graphs) out of GC's reach.

    A wide fan-out allocates many short-lived objects; each full collection would
    otherwise walk the hundreds of thousands of long-lived objects that langchain,
    langgraph and pydantic create at import, which roughly doubled per-branch CPU in
    bench/fanout.py. Call once, after imports and before running a graph.
    """
    gc.collect()
    gc.freeze()
