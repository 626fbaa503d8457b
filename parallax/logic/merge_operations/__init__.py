"""A learn batch's delta operations merged into one list, deterministically, without a model call.

The result depends neither on the operations' order nor on how reflections were batched.
See docs/internals/learning.md#merging-a-batchs-operations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from parallax.logic.merge_operations.clusters import Clusters
from parallax.logic.merge_operations.matching import (
    CONFLICT_THRESHOLD,
    DEFAULT_THRESHOLD,
    SAME_ABOUT_THRESHOLD,
    Bars,
    Matcher,
    Similarities,
)
from parallax.logic.merge_operations.operations_out import (
    ArchiveRule,
    archive_untouched,
    cluster_operations,
)
from parallax.logic.merge_operations.wordings import collect_wordings, normalise
from parallax.state.context import Embedder
from parallax.state.playbook import Operation, PlaybookItem

__all__ = ["ArchiveRule", "MergeResult", "merge_operations", "normalise"]

REPORT_KEYS = (
    "reflections",
    "operations_in",
    "adds_in",
    "updates_in",
    "tags",
    "archive_requests",
    "wordings",
    "items_added",
    "items_reinforced",
    "folded_into_existing",
    "duplicates_folded",
    "superseded",
    "archived",
    "reactivated",
    "dropped_unknown_target",
    "operations_out",
)


DEFAULT_RULE = ArchiveRule()


@dataclass
class MergeResult:
    operations: list[Operation]
    report: dict[str, int]


def merge_operations(
    op_lists: list[list[Operation]],
    existing: list[PlaybookItem],
    *,
    embed: Embedder,
    threshold: float | None = None,
    same_about_threshold: float = SAME_ABOUT_THRESHOLD,
    conflict_threshold: float = CONFLICT_THRESHOLD,
    rule: ArchiveRule = DEFAULT_RULE,
    judge: Callable[[str, str], bool] | None = None,
) -> MergeResult:
    """One operation list for `apply_operations(existing, ...)`, plus counts for the guard.

    The steps, one module each: distinct wordings (wordings.py), one embedding call and the
    match bars (matching.py), clusters (clusters.py), operations per cluster
    (operations_out.py).
    """
    ops = [op for ops in op_lists for op in ops]
    report: Counter[str] = Counter(reflections=len(op_lists), operations_in=len(ops))
    items = {i.id: i for i in existing}
    wordings = collect_wordings(ops, items, report)
    sim = Similarities(list(wordings), {normalise(i.text) for i in existing}, embed)
    bars = Bars(
        DEFAULT_THRESHOLD if threshold is None else threshold,
        same_about_threshold,
        conflict_threshold,
    )
    clusters = Clusters(existing, Matcher(sim, bars, judge))
    for op in ops:
        if op.op != "add":
            clusters.apply(op, wordings, rule.archive_votes, report)
    for w in sorted(wordings.values(), key=lambda w: w.key):  # canonical order
        if w.count or w.pinned:
            clusters.place(w)
    blocks = [
        block
        for c in clusters.all
        if c.alive and (block := cluster_operations(c, rule, report)) is not None
    ]
    touched = {item_id for item_id, _ in blocks}
    blocks += archive_untouched(
        clusters.active, touched, {i: c.alive for i, c in clusters.owner.items()}, rule, report
    )
    out = [op for _, block in sorted(blocks, key=lambda b: b[0]) for op in block]
    report["wordings"] = len(wordings)
    report["duplicates_folded"] = report["adds_in"] - report["items_added"]
    report["operations_out"] = len(out)
    return MergeResult(out, {k: int(report[k]) for k in REPORT_KEYS})
