"""A batch's operations merged into one candidate playbook, with a guard on the lessons it yields.

See docs/internals/learning.md#merging-a-batchs-operations.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.merge_operations import merge_operations
from parallax.runtime import embeddings
from parallax.runtime.run_context import context_of, tenant_of
from parallax.runtime.storage.stores import playbooks_in
from parallax.state.context import Context, Embedder, setting
from parallax.state.learn import LearnState
from parallax.state.playbook import Operation, PlaybookItem, apply_operations

log = logging.getLogger("parallax.learn")
PIECES = 4


def lessons_yielded(report: dict[str, Any]) -> int:
    return int(report.get("items_added", 0)) + int(report.get("items_reinforced", 0))


def _merge_in_pieces(
    op_lists: list[list[Operation]],
    existing: list[PlaybookItem],
    version: int,
    threshold: float | None,
    embed: Embedder,
) -> tuple[list[Operation], dict[str, Any]]:
    """Merge piece by piece, each against the items the previous pieces produced."""
    size = max(1, -(-len(op_lists) // PIECES))
    items = existing
    operations: list[Operation] = []
    report: dict[str, Any] = {}
    for start in range(0, len(op_lists), size):
        result = merge_operations(
            op_lists[start : start + size], items, embed=embed, threshold=threshold
        )
        operations += result.operations
        items = apply_operations(items, result.operations, version)
        for key, value in dict(result.report).items():
            if isinstance(value, (int, float)):
                report[key] = report.get(key, 0) + value
    return operations, report


async def consolidate(state: LearnState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    head = await playbooks_in(runtime.store, tenant_of(state.get("tenant"))).head(state["playbook"])
    runs = state.get("runs", [])
    op_lists = [[Operation.model_validate(o) for o in run["operations"]] for run in runs]
    with_lessons = sum(
        1 for run in runs if run.get("reflection") and run["reflection"].get("lessons")
    )
    embed = ctx.embedder or embeddings.embed
    result = await asyncio.to_thread(
        merge_operations, op_lists, head.items, embed=embed, threshold=ctx.dedupe_threshold
    )
    operations, report = result.operations, dict(result.report)
    floor = setting(ctx.guard_floor) * with_lessons
    guard = with_lessons > 0 and lessons_yielded(report) < floor
    if guard:
        log.warning(
            "batch %s: the merge kept %s lessons from %s reflections that had some, fewer than"
            " PARALLAX_GUARD_FLOOR (%.2f per reflection) expects; redoing the merge in %s smaller"
            " pieces",
            state["batch_index"] + 1,
            lessons_yielded(report),
            with_lessons,
            ctx.guard_floor,
            PIECES,
        )
        redo_ops, redo_report = await asyncio.to_thread(
            _merge_in_pieces, op_lists, head.items, head.version + 1, ctx.dedupe_threshold, embed
        )
        if lessons_yielded(redo_report) > lessons_yielded(report):
            operations, report = redo_ops, redo_report
    items = apply_operations(head.items, operations, head.version + 1)
    return {
        "candidate": {
            "base_version": head.version,
            "base_items": [i.model_dump() for i in head.items],
            "operations": [o.model_dump() for o in operations],
            "items": [i.model_dump() for i in items],
            "report": report,
            "guard_triggered": guard,
            "reflections": len(runs),
            "reflections_with_lessons": with_lessons,
            "train_accuracy": (
                round(sum(r["correct"] for r in runs) / len(runs), 4) if runs else 0.0
            ),
        }
    }
