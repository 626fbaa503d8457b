"""freeze_startup_objects (runtime/startup.py): the youngest generation is collected every
YOUNG_THRESHOLD allocations, not every 700; garbage in reference cycles is still collected."""

from __future__ import annotations

import gc
import weakref

from parallax.runtime.startup import YOUNG_THRESHOLD, freeze_startup_objects


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_the_young_generation_is_collected_less_often_and_cycles_still_go():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, *before[1:])
        freeze_startup_objects()
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        alive = [Node() for _ in range(2_000)]
        assert (
            gone() is not None
        )  # 2,000 allocations, past CPython's 700: the young generation still waits
        alive += [Node() for _ in range(YOUNG_THRESHOLD)]
        assert (
            gone() is None
        )  # past YOUNG_THRESHOLD, allocations alone collect the cycle, no gc.collect()
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


async def test_a_served_replica_freezes_what_it_loaded_once_its_graphs_are_loaded(monkeypatch):
    """parallax serve's lifespan (server/background_loops.py) runs inside Aegra's, after the graphs
    are loaded."""
    from parallax.server.background_loops import lifespan

    monkeypatch.delenv("DATABASE_URL", raising=False)
    before = gc.get_threshold()
    try:
        gc.unfreeze()
        gc.set_threshold(700, *before[1:])
        async with lifespan(object()):
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
            assert gc.get_freeze_count() > 10_000  # the modules imported so far, at least
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
