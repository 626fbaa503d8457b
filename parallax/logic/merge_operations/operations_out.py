"""The operations one merged cluster turns into, and the archive rule that decides status.

See docs/internals/learning.md#merging-a-batchs-operations.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from parallax.logic.merge_operations.clusters import Cluster
from parallax.state.playbook import Operation, PlaybookItem, item_id_for


@dataclass(frozen=True)
class ArchiveRule:
    """An item is archived when harmful >= min_harmful and harmful > ratio * helpful."""

    min_harmful: int = 3
    ratio: float = 2.0
    archive_votes: int = 3
    """Harmful votes one curator `archive` request counts as (enough if nothing speaks for the
    item)."""

    def archives(self, helpful: int, harmful: int) -> bool:
        return harmful >= self.min_harmful and harmful > self.ratio * helpful

    def why(self, helpful: int, harmful: int) -> str:
        return f"harmful {harmful} >= {self.min_harmful} and > {self.ratio:g} x helpful {helpful}"


def cluster_operations(
    c: Cluster, rule: ArchiveRule, report: Counter[str]
) -> tuple[str, list[Operation]] | None:
    """(item id, its operations) for one live cluster; None when the batch did not touch it."""
    proposals = sum(w.count for w in c.wordings)
    provenance = c.provenance.union(*(w.provenance for w in c.wordings))
    rep = c.rep
    if not c.items:
        if not proposals:
            return None
        report["items_added"] += 1
        new_id = item_id_for(rep.text, rep.section)
        return new_id, [
            Operation(
                op="add",
                item_id=new_id,
                section=rep.section,
                text=rep.text,
                about=sorted(rep.about),
                count=proposals,
                provenance=sorted(provenance),
                reason="merged",
            )
        ]
    if not (c.wordings or c.helpful or c.harmful or provenance or len(c.items) > 1):
        return None
    report["folded_into_existing"] += proposals
    report["items_reinforced"] += proposals > 0
    helpful = sum(i.helpful for i in c.items) + proposals + c.helpful
    harmful = sum(i.harmful for i in c.items) + c.harmful
    provenance |= {p for i in c.items for p in i.provenance}
    keep = rep.item
    new_id = keep.id if keep else item_id_for(rep.text, rep.section)
    block = _superseded(c, keep, new_id, report)
    if keep is None:
        block.append(
            Operation(
                op="add",
                item_id=new_id,
                section=rep.section,
                text=rep.text,
                about=sorted(rep.about),
                count=helpful + 1,
                provenance=sorted(provenance),
                reason="merged: new representative",
            )
        )
        if harmful:
            block.append(
                Operation(op="tag_harmful", item_id=new_id, count=harmful, reason="carried over")
            )
        was_active, gained = True, True
    else:
        block += _tags(keep, helpful, harmful, provenance)
        was_active, gained = keep.status == "active", helpful - keep.helpful > 0
    block += _status_change(rule, (helpful, harmful), keep, new_id, was_active, gained, report)
    return new_id, block


def _superseded(
    c: Cluster, keep: PlaybookItem | None, new_id: str, report: Counter[str]
) -> list[Operation]:
    """An archive for each active item of the cluster other than the one kept (`new_id`
    supersedes them)."""
    block = []
    for old in sorted(c.items, key=lambda i: i.id):
        if old is not keep:
            report["superseded"] += 1
            if old.status == "active":
                block.append(
                    Operation(op="archive", item_id=old.id, reason=f"superseded by {new_id}")
                )
    return block


def _tags(keep: PlaybookItem, helpful: int, harmful: int, provenance: set[str]) -> list[Operation]:
    """The kept item's counts brought up to the cluster's: helpful (or new provenance) and
    harmful tags."""
    block = []
    more_helpful, more_harmful = helpful - keep.helpful, harmful - keep.harmful
    if more_helpful or not more_harmful and not set(provenance) <= set(keep.provenance):
        block.append(
            Operation(
                op="tag_helpful", item_id=keep.id, count=more_helpful, provenance=sorted(provenance)
            )
        )
    if more_harmful:
        block.append(
            Operation(
                op="tag_harmful", item_id=keep.id, count=more_harmful, provenance=sorted(provenance)
            )
        )
    return block


def _status_change(
    rule: ArchiveRule,
    counts: tuple[int, int],
    keep: PlaybookItem | None,
    new_id: str,
    was_active: bool,
    gained: bool,
    report: Counter[str],
) -> list[Operation]:
    """The item archived when its counts now meet the rule, or reactivated when they no longer do
    and it gained."""
    helpful, harmful = counts
    archive = rule.archives(helpful, harmful)
    if archive and was_active:
        report["archived"] += 1
        return [Operation(op="archive", item_id=new_id, reason=rule.why(helpful, harmful))]
    if not archive and not was_active and gained and keep is not None:
        report["reactivated"] += 1
        return [
            Operation(
                op="add",
                item_id=new_id,
                section=keep.section,
                text=keep.text,
                about=keep.about,
                count=1,
                reason="reactivated: counts no longer meet the archive rule",
            )
        ]
    return []


def archive_untouched(
    active: list[PlaybookItem],
    touched: set[str],
    alive: dict[str, bool],
    rule: ArchiveRule,
    report: Counter[str],
) -> list[tuple[str, list[Operation]]]:
    """Archive operations for active items the batch did not touch whose counts now meet the rule
    (e.g. after the rule was tightened)."""
    blocks = []
    for item in active:
        if item.id not in touched and alive[item.id] and rule.archives(item.helpful, item.harmful):
            report["archived"] += 1
            blocks.append(
                (
                    item.id,
                    [
                        Operation(
                            op="archive",
                            item_id=item.id,
                            reason=rule.why(item.helpful, item.harmful),
                        )
                    ],
                )
            )
    return blocks
