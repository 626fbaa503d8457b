"""run_watched (logic/stragglers.py) runs the original copy in the caller's task; a backup that wins
cancels it there. What the caller must see: the backup's record and a task that goes on uncancelled;
a cancel from outside (a settled vote, a cancelled run) during a race still stops both copies and
reaches the caller.
"""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from parallax.logic.stragglers import StragglerWatch, run_watched
from parallax.state.lifecycle import Lifecycle


def copies(original_s: float, backup_s: float, stopped: list[str]):
    """A branch whose original takes `original_s` and whose backup takes `backup_s`; `stopped` hears
    who was cancelled."""

    async def run_copy(life: Lifecycle) -> dict:
        who = "backup" if life.transitions[0]["reason"].startswith("backup copy") else "original"
        life.move("IN_PROGRESS")
        try:
            await asyncio.sleep(original_s if who == "original" else backup_s)
        except asyncio.CancelledError:
            stopped.append(who)
            life.finish("CANCELLED", "cancelled")
            raise
        life.move("COMPLETED")
        return {"status": "ok", "who": who}

    return run_copy


def watch_with_siblings() -> StragglerWatch:
    watch = StragglerWatch(factor=3.0, min_s=0.05)
    watch.finished(0.01)
    watch.finished(0.01)
    return watch


def dispatched() -> Lifecycle:
    life = Lifecycle()
    life.move("PENDING")
    life.move("DISPATCHED")
    return life


async def test_a_backup_that_wins_hands_its_record_to_a_caller_that_goes_on():
    stopped: list[str] = []
    life = dispatched()
    record = await asyncio.wait_for(
        run_watched(copies(5.0, 0.01, stopped), life, watch_with_siblings(), asyncio.Semaphore(2)),
        2.0,
    )
    assert record["who"] == "backup" and record["backup"]["winner"] == "backup"
    assert stopped == ["original"] and life.state == "CANCELLED"
    assert life.transitions[-1]["reason"] == "the other copy finished first"
    await asyncio.sleep(
        0.01
    )  # the caller's task was cancelled for the backup only: it is not cancelled any more
    assert asyncio.current_task().cancelling() == 0


async def test_an_original_that_wins_stops_the_backup():
    stopped: list[str] = []
    record = await run_watched(
        copies(0.15, 5.0, stopped), dispatched(), watch_with_siblings(), asyncio.Semaphore(2)
    )
    assert record["who"] == "original" and record["backup"]["winner"] == "original"
    assert (
        stopped == ["backup"] and record["backup"]["other_transitions"][-1]["state"] == "CANCELLED"
    )


async def test_a_cancel_from_outside_during_a_race_stops_both_copies_and_reaches_the_caller():
    stopped: list[str] = []
    branch = asyncio.create_task(
        run_watched(
            copies(5.0, 5.0, stopped), dispatched(), watch_with_siblings(), asyncio.Semaphore(2)
        )
    )
    await asyncio.sleep(0.3)  # past min_s: the backup runs
    branch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await branch
    await asyncio.sleep(0.01)
    assert sorted(stopped) == ["backup", "original"]


async def test_a_fast_branch_starts_no_task():
    before = len(asyncio.all_tasks())
    seen: list[int] = []

    async def run_copy(life: Lifecycle) -> dict:
        seen.append(len(asyncio.all_tasks()))
        return {"status": "ok"}

    assert await run_watched(
        run_copy, dispatched(), watch_with_siblings(), asyncio.Semaphore(1)
    ) == {"status": "ok"}
    assert seen == [before]


def test_one_timer_serves_the_fan_out_and_a_watch_outlives_its_event_loop():
    """The watch's one timer was armed on a loop that ended before it fired: a straggler on the next
    loop still gets its backup."""
    watch = watch_with_siblings()
    stopped: list[str] = []

    async def fast_branches() -> list[dict]:
        return await asyncio.gather(
            *(
                run_watched(copies(0.0, 5.0, stopped), dispatched(), watch, asyncio.Semaphore(2))
                for _ in range(50)
            )
        )

    assert all(r["who"] == "original" and "backup" not in r for r in asyncio.run(fast_branches()))
    assert (
        len(watch._due) == 50
    )  # due at min_s, after this loop ended: none of them started a watcher

    async def straggler() -> dict:
        return await asyncio.wait_for(
            run_watched(copies(5.0, 0.01, stopped), dispatched(), watch, asyncio.Semaphore(2)), 2.0
        )

    record = asyncio.run(straggler())
    assert (
        record["who"] == "backup"
        and record["backup"]["winner"] == "backup"
        and stopped == ["original"]
    )


BRANCH: contextvars.ContextVar[str] = contextvars.ContextVar("branch", default="none")


async def test_a_backup_runs_in_its_own_branchs_context_not_the_one_that_armed_the_timer():
    """What a branch's task set (LangGraph's config of its Send task, a plan's budget sink) its
    backup sees too."""
    watch = watch_with_siblings()
    seen: dict[str, str] = {}

    async def branch(name: str, original_s: float) -> dict:
        BRANCH.set(name)

        async def run_copy(life: Lifecycle) -> dict:
            who = (
                "backup" if life.transitions[0]["reason"].startswith("backup copy") else "original"
            )
            await asyncio.sleep(original_s if who == "original" else 0.01)
            seen[f"{name} {who}"] = BRANCH.get()
            return {"status": "ok", "who": who}

        return await run_watched(run_copy, dispatched(), watch, asyncio.Semaphore(4))

    first = asyncio.create_task(
        branch("first", 0.0)
    )  # arms the watch's one timer, and is done long before it fires
    await asyncio.sleep(0)
    slow = await asyncio.wait_for(branch("slow", 5.0), 2.0)
    await first
    assert slow["who"] == "backup" and seen["slow backup"] == "slow"
