"""What one plan task sees, what it leaves behind, and when an earlier result stands in for it.

See docs/internals/plans.md#what-a-task-sees-and-leaves.
"""

from __future__ import annotations

import time
from typing import Any

from parallax.logic.plan_check import placeholders, substitute, task_texts
from parallax.state.plan import FINISHED, Plan, PlanTask

BOARD_INLINE_CHARS = 4000


def dependency_results(task: PlanTask, dependencies: dict[int, dict[str, Any]]) -> dict[int, str]:
    """Task id -> the text a placeholder of that dependency becomes."""
    return {
        dep: (
            (record.get("output") or "")
            if record["status"] in FINISHED
            else f"(no result: task {dep} {record['status'].lower()})"
        )
        for dep, record in dependencies.items()
    }


def task_input(task: PlanTask, results: dict[int, str]) -> tuple[str, str]:
    """(goal, inputs text) with placeholders filled, and the unnamed dependencies' results
    appended."""
    goal = substitute(task.goal, results)
    lines = [
        f"{name}: {substitute(value, results)}"
        for name, value in task.inputs.items()
        if name not in ("document", "tool")
    ]
    named = {ref for text in task_texts(task) for ref in placeholders(text)}
    unnamed = [d for d in task.deps if d not in named]
    if unnamed:
        lines.append(
            "Results of earlier steps:\n" + "\n".join(f"[{d}] {results[d]}" for d in unnamed)
        )
    return goal, "\n".join(lines)


def task_record(
    task: PlanTask, round_: int, print_: str, status: str, **fields: Any
) -> dict[str, Any]:
    """The record of one task in one round (what `--json` shows under `tasks`); `print_` is the
    task's fingerprint (logic/plan_check.py)."""
    return {
        "id": task.id,
        "round": round_,
        "kind": task.kind,
        "goal": task.goal,
        "deps": list(task.deps),
        "optional": task.optional,
        "key": task.board_key,
        "fingerprint": print_,
        "status": status,
        "reason": "",
        "output": "",
        "branches": [],
        "finished_at": round(time.time(), 3),
        **fields,
    }


def reusable(print_: str, earlier: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A finished record of an earlier round that computed exactly this task (fingerprint
    `print_`)."""
    return next(
        (r for r in reversed(earlier) if r.get("fingerprint") == print_ and r["status"] == "DONE"),
        None,
    )


def board_write(
    task: PlanTask, plan: Plan, record: dict[str, Any], where: list[str]
) -> dict[str, Any]:
    """The board update of a finished task ({} for one that did not finish). `where` names the
    stored record."""
    if record["status"] not in FINISHED:
        return {}
    output = record.get("output") or ""
    value = (
        output
        if len(output) <= BOARD_INLINE_CHARS
        else {"preview": output[:400], "chars": len(output), "store": where}
    )
    return {
        task.board_key: {
            "policy": plan.board_policy,
            "entries": [{"task": task.id, "round": record["round"], "value": value}],
        }
    }
