"""Merge the delta operations of a whole learn batch into one operation list, deterministically.

Why: each reflection is curated on its own (no model call ever sees many reflections), so a
batch of a hundred runs arrives as a hundred small operation lists that repeat the same
lessons in other words. This merge folds them without a model call, and the result must
depend neither on the order of the operations nor on how reflections were split into
batches: the playbook learned at batch 100 should hold the same lessons as at batch 1.

How (DESIGN.md: raw similarity does not separate lessons, so one threshold either merges
cousins or keeps paraphrases apart):

* Match = embedding similarity of the curator's canonical `text` against a threshold chosen
  by the `about` names: the same names (or none on both sides) -> `same_about_threshold`;
  names on both sides but none shared ("gross margin" vs "operating margin") ->
  `conflict_threshold` (near-identical only); otherwise `threshold`. Identical normalised
  text always matches. An optional deterministic `judge(a, b)` decides the ambiguous band
  (same names, similarity between `same_about_threshold` and `threshold`).
* An item is represented by ONE wording: the minimum of its wordings under a total order
  (`canonical_key`: names something, fewest names, shortest, alphabetical). A minimum is
  associative, so it does not matter which batch brought which wording. The id is
  `item_id_for(representative)`; when a later batch brings a smaller wording, the old item is
  archived ("superseded by ...") and its counts and provenance move to the new id.
* Wordings are processed in canonical order; each joins EVERY cluster whose representative
  (or a wording of this batch in it) it matches. Existing items start as clusters, so a
  near-duplicate of an existing item folds into it, and a wording that matches two items
  bridges them into one, which is what lets a sequential run (batch 1) end with the same
  items as a large batch. Archived items are only a fallback when no active item matches,
  so a lesson archived as harmful is reinforced, not re-added. If the match relation is an
  equivalence on the data the final playbook is identical for every order and batching;
  otherwise (a~b, b~c, a!~c) batches can cut a chain differently, never the order in a batch.
* Counts are sums: a lesson proposed n times has helpful n-1 (apply_operations' `add`
  semantics) and a fold into an existing item is `tag_helpful` with the number of proposals.
  A curator's `archive` request is `archive_votes` harmful votes, and the status of every
  touched item is a pure function of its summed counts (`ArchiveRule`), so archiving does
  not depend on batching either; an archived item whose counts recover is reactivated.
* `update` proposes a wording for its target and competes for the representative like any
  other wording ("last writer wins" would depend on arrival order).
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
from parallax.logic.merge_operations.operations_out import ArchiveRule, archive_untouched, cluster_operations
from parallax.logic.merge_operations.wordings import collect_wordings, normalise
from parallax.state.context import Embedder
from parallax.state.playbook import Operation, PlaybookItem

__all__ = ["ArchiveRule", "MergeResult", "merge_operations", "normalise"]

REPORT_KEYS = ("reflections", "operations_in", "adds_in", "updates_in", "tags", "archive_requests", "wordings",
               "items_added", "items_reinforced", "folded_into_existing", "duplicates_folded", "superseded",
               "archived", "reactivated", "dropped_unknown_target", "operations_out")


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
    bars = Bars(DEFAULT_THRESHOLD if threshold is None else threshold, same_about_threshold, conflict_threshold)
    clusters = Clusters(existing, Matcher(sim, bars, judge))
    for op in ops:
        if op.op != "add":
            clusters.apply(op, wordings, rule.archive_votes, report)
    for w in sorted(wordings.values(), key=lambda w: w.key):  # canonical order
        if w.count or w.pinned:
            clusters.place(w)
    blocks = [block for c in clusters.all if c.alive and (block := cluster_operations(c, rule, report)) is not None]
    touched = {item_id for item_id, _ in blocks}
    blocks += archive_untouched(clusters.active, touched, {i: c.alive for i, c in clusters.owner.items()}, rule, report)
    out = [op for _, block in sorted(blocks, key=lambda b: b[0]) for op in block]
    report["wordings"] = len(wordings)
    report["duplicates_folded"] = report["adds_in"] - report["items_added"]
    report["operations_out"] = len(out)
    return MergeResult(out, {k: int(report[k]) for k in REPORT_KEYS})
