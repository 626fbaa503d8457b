"""The plan check and the DAG pieces: every way a plan can be wrong is refused with a message that
names it."""

from __future__ import annotations

import asyncio

import pytest

from parallax.logic.dag_schedule import PrioritySlots, WriteLocks
from parallax.logic.plan_check import (
    PlanError,
    PlanLimits,
    check_plan,
    critical_path,
    fingerprint,
    fingerprints,
    levels,
    placeholders,
    remaining_path,
    same_plan,
    substitute,
    writes_overlap,
)
from parallax.logic.plan_tools import ToolError, calc
from parallax.state.plan import Plan, merge_board

LIMITS = PlanLimits(max_tasks=10)


def plan(*tasks: dict, **fields) -> Plan:
    return Plan.model_validate({"tasks": list(tasks), **fields})


def refused(p: Plan, limits: PlanLimits = LIMITS) -> str:
    with pytest.raises(PlanError) as caught:
        check_plan(p, limits)
    return str(caught.value)


@pytest.mark.parametrize(
    "tasks, message",
    [
        (
            [{"id": 1, "goal": "a", "deps": [2]}, {"id": 2, "goal": "b", "deps": [1]}],
            "cycle (1 -> 2 -> 1)",
        ),
        (
            [
                {"id": 1, "goal": "a", "deps": [3]},
                {"id": 2, "goal": "b", "deps": [3]},
                {"id": 3, "goal": "c", "deps": [1]},
            ],
            "cycle",
        ),
        ([{"id": 1, "goal": "a", "deps": [7]}], "task 1 depends on unknown task 7"),
        ([{"id": 1, "goal": "a", "deps": [1]}], "task 1 depends on itself"),
        ([{"id": 1, "goal": "a"}, {"id": 1, "goal": "b"}], "duplicate task ids [1]"),
        (
            [{"id": 1, "goal": "a"}, {"id": 2, "goal": "use $1 and ${3}", "deps": [1]}],
            "task 2 uses $3, but there is no task 3",
        ),
        (
            [
                {"id": 1, "goal": "a"},
                {"id": 2, "goal": "b"},
                {"id": 3, "goal": "${1}+${2}", "deps": [1]},
            ],
            "task 3 uses $2 but does not list 2 in deps",
        ),
        (
            [{"id": 1, "goal": "a"}, {"id": 2, "goal": "b", "inputs": {"x": "$1"}}],
            "task 2 uses $1 but does not list 1",
        ),
        (
            [{"id": 1, "goal": "fix it", "kind": "edit", "writes": ["a.py"]}],
            "task 1 is an edit task but the run has no repository",
        ),
        (
            [{"id": 1, "goal": "read", "kind": "section"}],
            "reads a document in sections, but the run has none",
        ),
        (
            [{"id": 1, "goal": "add", "kind": "tool", "inputs": {"tool": "shell"}}],
            "set inputs.tool to one of calc",
        ),
    ],
)
def test_bad_plans_are_refused_with_the_reason(tasks, message):
    assert message in refused(plan(*tasks))


def test_too_many_tasks_names_the_setting():
    tasks = [{"id": i, "goal": f"step {i}"} for i in range(1, 13)]
    assert "12 tasks, more than 10 (PARALLAX_PLAN_MAX_TASKS)" in refused(plan(*tasks))


def test_edit_tasks_must_declare_their_files_inside_the_repository():
    repo = PlanLimits(max_tasks=5, has_repo=True)
    assert "must list the files it writes" in refused(
        plan({"id": 1, "goal": "x", "kind": "edit"}), repo
    )
    assert "'../etc/passwd' is not a path inside" in refused(
        plan({"id": 1, "goal": "x", "kind": "edit", "writes": ["../etc/passwd"]}), repo
    )
    assert "only edit tasks write files" in refused(
        plan({"id": 1, "goal": "x", "writes": ["a.py"]}), repo
    )


def test_synthesis_needs_what_it_uses():
    assert "assembly needs a template" in refused(
        plan({"id": 1, "goal": "a"}, synthesis="assembly")
    )
    assert "template uses $4" in refused(
        plan({"id": 1, "goal": "a"}, synthesis="assembly", template="${1} ${4}")
    )
    assert "vote synthesis needs at least two" in refused(
        plan({"id": 1, "goal": "a"}, synthesis="vote")
    )


def test_several_placeholders_in_one_input_are_all_filled():
    assert placeholders("${1}+${2} and $3, not $12x? $12") == [1, 2, 3, 12, 12]
    assert substitute("${1}+${2}*$1", {1: "40", 2: "2"}) == "40+2*40"
    assert calc("${1}+${2}", {1: "$40", 2: "two"}) == "42"
    assert calc("($1 - $2) / 4", {1: "fifteen", 2: "5 apples"}) == "2.5"
    with pytest.raises(ToolError, match=r"\$2 is not a number"):
        calc("$1 + $2", {1: "3", 2: "blue"})
    with pytest.raises(ToolError, match="numbers and"):
        calc("__import__('os')", {})


def test_dag_arithmetic():
    p = plan(
        {"id": 1, "goal": "a"},
        {"id": 2, "goal": "b"},
        {"id": 3, "goal": "c", "deps": [1]},
        {"id": 4, "goal": "d", "deps": [3, 2]},
    )
    assert levels(p) == {1: 0, 2: 0, 3: 1, 4: 2}
    assert remaining_path(p) == {4: 1.0, 3: 2.0, 2: 2.0, 1: 3.0}
    assert critical_path(p, {1: 1, 2: 5, 3: 1, 4: 1}) == 6  # 2 -> 4
    changed_root = plan(
        {"id": 1, "goal": "A"},
        {"id": 2, "goal": "b"},
        {"id": 3, "goal": "c", "deps": [1]},
        {"id": 4, "goal": "d", "deps": [3, 2]},
    )
    assert fingerprint(p.task(4), p) != fingerprint(
        changed_root.task(4), changed_root
    )  # a change upstream shows
    assert fingerprint(p.task(2), p) == fingerprint(changed_root.task(2), changed_root)
    assert fingerprints(p) == {t.id: fingerprint(t, p) for t in p.tasks}
    assert same_plan(p, p.model_dump()) and not same_plan(p, plan({"id": 1, "goal": "a"}))
    assert writes_overlap(["src/"], ["src/a.py"]) and writes_overlap(["a.py"], ["./a.py"])
    assert not writes_overlap(["src/a.py"], ["src/ab.py"])


async def test_priority_slots_give_the_next_slot_to_the_longest_remaining_path():
    slots, order = PrioritySlots(1), []
    await slots.acquire(0)  # the cap binds

    async def wait(name: str, priority: float):
        await slots.acquire(priority)
        order.append(name)
        slots.release()

    waiting = [
        asyncio.create_task(wait(n, p)) for n, p in (("short", 1), ("long", 5), ("middle", 3))
    ]
    await asyncio.sleep(0.01)
    slots.release()
    await asyncio.gather(*waiting)
    assert order == ["long", "middle", "short"] and slots.free == 1


async def test_overlapping_writes_never_hold_at_once():
    locks, inside, peak = WriteLocks(), set(), []

    async def edit(owner: int, writes: list[str]):
        async with locks.hold(owner, writes):
            inside.add(owner)
            peak.append(set(inside))
            await asyncio.sleep(0.02)
            inside.discard(owner)

    await asyncio.gather(edit(1, ["src/a.py"]), edit(2, ["src/"]), edit(3, ["docs/x.md"]))
    assert not any({1, 2} <= seen for seen in peak)  # 1 and 2 overlap: never together
    assert any(
        {1, 3} <= seen or {2, 3} <= seen for seen in peak
    )  # 3 does not: it ran beside one of them


@pytest.mark.parametrize(
    "policy, value, conflict",
    [
        ("append", "from 1\n\nfrom 2", False),
        ("keep_both", ["from 1", "from 2"], False),
        ("conflict", None, True),
    ],
)
def test_board_policy_is_the_same_whichever_writer_lands_first(policy, value, conflict):
    one = {"k": {"policy": policy, "entries": [{"task": 1, "round": 0, "value": "from 1"}]}}
    two = {"k": {"policy": policy, "entries": [{"task": 2, "round": 0, "value": "from 2"}]}}
    forward, backward = (
        merge_board(merge_board({}, one), two),
        merge_board(merge_board({}, two), one),
    )
    assert forward == backward
    assert forward["k"]["value"] == value and forward["k"]["conflict"] is conflict
    resolved = merge_board(
        forward, {"k": {"entries": [], "resolved": {"value": "from 2", "by": "judge-1"}}}
    )
    if conflict:
        assert resolved["k"]["value"] == "from 2" and resolved["k"]["resolved"]["by"] == "judge-1"
    rerun = merge_board(
        forward, {"k": {"policy": policy, "entries": [{"task": 1, "round": 0, "value": "from 1"}]}}
    )
    assert rerun == forward  # a task run again after a resume replaces its own entry


def test_a_large_result_stays_in_the_store_and_the_board_holds_where():
    from parallax.logic.plan_tasks import BOARD_INLINE_CHARS, board_write

    p = plan({"id": 1, "goal": "a", "key": "report"})
    record = {"id": 1, "round": 0, "status": "DONE", "output": "x" * (BOARD_INLINE_CHARS + 1)}
    where = ["plan_results", "default", "trace", "0.1"]
    entry = board_write(p.task(1), p, record, where)["report"]["entries"][0]["value"]
    assert entry == {"preview": "x" * 400, "chars": BOARD_INLINE_CHARS + 1, "store": where}
    assert board_write(p.task(1), p, {**record, "status": "FAILED"}, where) == {}


def test_the_live_tree_shows_each_task_under_its_dependency_with_its_status():
    from rich.console import Console

    from parallax.cli.progress import plan_tree

    p = {
        "tasks": [
            {"id": 1, "goal": "fetch"},
            {"id": 2, "goal": "sum $1", "deps": [1], "kind": "tool"},
        ]
    }
    console = Console(width=120, record=True)
    console.print(
        plan_tree(
            p, {1: {"status": "DONE"}, 2: {"status": "SKIPPED", "reason": "dependency 1 failed"}}
        )
    )
    text = console.export_text()
    assert (
        "DONE 1 solve: fetch" in text
        and "SKIPPED 2 tool: sum $1 (after 1) - dependency 1 failed" in text
    )
    assert text.index("1 solve") < text.index("2 tool") and "└──" in text.split("1 solve")[1]
