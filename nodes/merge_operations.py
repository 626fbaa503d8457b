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
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from parallax.embeddings import Embedder
from state.playbook import Operation, PlaybookItem, item_id_for

DEFAULT_THRESHOLD = 0.80
SAME_ABOUT_THRESHOLD = 0.50
CONFLICT_THRESHOLD = 0.95


@dataclass(frozen=True)
class ArchiveRule:
    """An item is archived when harmful >= min_harmful and harmful > ratio * helpful."""

    min_harmful: int = 3
    ratio: float = 2.0
    archive_votes: int = 3
    """Harmful votes one curator `archive` request counts as (enough if nothing speaks for the item)."""

    def archives(self, helpful: int, harmful: int) -> bool:
        return harmful >= self.min_harmful and harmful > self.ratio * helpful


@dataclass
class MergeResult:
    operations: list[Operation]
    report: dict[str, int]


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


def canonical_key(text: str, section: str, about) -> tuple:
    """Total order on wordings; the representative of an item is the minimum."""
    names = _about(about)
    return (len(names) == 0, len(names), len(normalise(text)), normalise(text), section)


def _about(names) -> frozenset[str]:
    return frozenset(n for n in (normalise(a) for a in names) if n)


@dataclass
class _Wording:
    """One distinct lesson text of the batch (adds, and update proposals, with that text)."""

    norm: str
    text: str
    section: str
    about: frozenset
    count: int = 0
    provenance: set = field(default_factory=set)
    pinned: set = field(default_factory=set)

    @property
    def key(self) -> tuple:
        return canonical_key(self.text, self.section, self.about)


@dataclass
class _Rep:
    key: tuple
    norm: str
    text: str
    section: str
    about: frozenset
    item: PlaybookItem | None = None

    @classmethod
    def of(cls, x: PlaybookItem | _Wording) -> _Rep:
        item = x if isinstance(x, PlaybookItem) else None
        return cls(canonical_key(x.text, x.section, x.about) + ((item.id,) if item else ("",)), normalise(x.text),
                   x.text, x.section, _about(x.about), item)


@dataclass(eq=False)
class _Cluster:
    """Existing items and new wordings that are one lesson; `rep` is their canonical minimum."""

    rep: _Rep
    items: list = field(default_factory=list)
    wordings: list = field(default_factory=list)
    helpful: int = 0
    harmful: int = 0
    provenance: set = field(default_factory=set)
    alive: bool = True

    @property
    def matchable(self) -> bool:  # archived-only clusters are a fallback, never bridged
        return not self.items or any(i.status == "active" for i in self.items)

    def absorb(self, other: _Cluster) -> None:
        self.items += other.items
        self.wordings += other.wordings
        self.helpful, self.harmful = self.helpful + other.helpful, self.harmful + other.harmful
        self.provenance |= other.provenance
        self.rep = min(self.rep, other.rep, key=lambda r: r.key)
        other.alive = False


def merge_operations(
    op_lists: list[list[Operation]],
    existing: list[PlaybookItem],
    *,
    embed: Embedder,
    threshold: float | None = None,
    same_about_threshold: float = SAME_ABOUT_THRESHOLD,
    conflict_threshold: float = CONFLICT_THRESHOLD,
    rule: ArchiveRule = ArchiveRule(),
    judge: Callable[[str, str], bool] | None = None,
) -> MergeResult:
    """One operation list for `apply_operations(existing, ...)`, plus counts for the guard."""
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    ops = [op for ops in op_lists for op in ops]
    items = {i.id: i for i in existing}
    active = sorted((i for i in existing if i.status == "active"), key=lambda i: i.id)
    archived = sorted((i for i in existing if i.status != "active"), key=lambda i: _Rep.of(i).key)
    report: Counter = Counter(reflections=len(op_lists), operations_in=len(ops))

    # -- distinct wordings; exact duplicates are united first ---------------------------
    wordings: dict[str, _Wording] = {}

    def wording(text: str, section: str, about) -> _Wording:
        norm = normalise(text)
        w = wordings.get(norm)
        if w is None:
            w = wordings[norm] = _Wording(norm, text, section, _about(about))
        else:  # the same text from several reflections: smallest spelling, all names
            w.text, w.section, w.about = min(w.text, text), min(w.section, section), w.about | _about(about)
        return w

    for op in ops:
        if op.op == "add" and normalise(op.text):
            report["adds_in"] += 1
            w = wording(op.text, op.section, op.about)
            w.count += op.count
            w.provenance |= set(op.provenance)
    for op in ops:  # update texts are wordings too; embed everything in one call
        if op.op == "update" and normalise(op.text) and op.item_id in items:
            wording(op.text, items[op.item_id].section, op.about or items[op.item_id].about)
    norms = sorted(set(wordings) | {normalise(i.text) for i in existing})
    index = {n: k for k, n in enumerate(norms)}
    vectors = np.asarray(embed(norms), dtype=np.float32) if norms else np.zeros((0, 1), np.float32)
    rows = {n: k for k, n in enumerate(sorted(wordings))}  # wordings x everything; item x item only on demand
    block = vectors[[index[n] for n in sorted(wordings)]] @ vectors.T if rows else np.zeros((0, len(norms)))

    def sim(a: str, b: str) -> float:
        if a in rows:
            return float(block[rows[a], index[b]])
        if b in rows:
            return float(block[rows[b], index[a]])
        return float(vectors[index[a]] @ vectors[index[b]])

    def limit(a: frozenset, b: frozenset) -> float:
        if a == b:  # the same names, or both general (no names)
            return same_about_threshold
        if a and b:
            return threshold if a & b else conflict_threshold
        return threshold

    verdicts: dict[tuple[str, str], bool] = {}

    def matches(norm: str, about: frozenset, rep: _Rep) -> bool:
        if norm == rep.norm:
            return True
        score, bar = sim(norm, rep.norm), limit(about, rep.about)
        if judge is not None and about == rep.about and same_about_threshold <= score < threshold:
            pair = (min(norm, rep.norm), max(norm, rep.norm))
            if pair not in verdicts:
                verdicts[pair] = bool(judge(*pair))
            return verdicts[pair]
        return score >= bar

    def target(item_id: str | None) -> PlaybookItem | None:
        """The item an op means; an archived item superseded by a matching smaller wording redirects to it."""
        item = items.get(item_id or "")
        if item is None or item.status == "active":
            return item
        below, norm, about = _Rep.of(item).key, normalise(item.text), _about(item.about)
        heirs = [a for a in active if _Rep.of(a).key < below and matches(norm, about, _Rep.of(a))]
        heirs = heirs or [a for a in archived
                          if a.id != item.id and _Rep.of(a).key < below and matches(norm, about, _Rep.of(a))]
        return min(heirs, key=lambda a: (-sim(norm, normalise(a.text)), a.id)) if heirs else item

    clusters: list[_Cluster] = []
    owner: dict[str, _Cluster] = {}

    def cluster_of(item: PlaybookItem) -> _Cluster:
        while item.id in owner and not owner[item.id].alive:  # follow absorptions
            owner[item.id] = next(c for c in clusters if c.alive and any(i.id == item.id for i in c.items))
        if item.id not in owner:
            owner[item.id] = _Cluster(_Rep.of(item), [item])
            clusters.append(owner[item.id])
        return owner[item.id]

    for item in active:
        cluster_of(item)
    for op in ops:
        if op.op == "add":
            continue
        item = target(op.item_id)
        if item is None:
            report["dropped_unknown_target"] += 1
            continue
        c = cluster_of(item)
        c.provenance |= set(op.provenance)
        if op.op in ("tag_helpful", "tag_harmful"):
            report["tags"] += 1
            c.helpful += op.count if op.op == "tag_helpful" else 0
            c.harmful += op.count if op.op == "tag_harmful" else 0
        elif op.op == "archive":
            report["archive_requests"] += 1
            c.harmful += rule.archive_votes * op.count
        elif op.op == "update":
            report["updates_in"] += 1
            if normalise(op.text):
                w = wordings[normalise(op.text)]
                w.provenance |= set(op.provenance)
                w.pinned.add(item.id)

    # -- each wording, in canonical order, joins every cluster whose representative it matches
    by_text: dict[str, PlaybookItem] = {}
    for i in sorted(existing, key=lambda i: (i.status != "active", _Rep.of(i).key)):
        by_text.setdefault(normalise(i.text), i)
    for w in sorted(wordings.values(), key=lambda w: w.key):
        if not (w.count or w.pinned):
            continue
        group = [cluster_of(target(p.id) if p.status != "active" else p)
                 for p in [by_text.get(w.norm)] + [items[i] for i in sorted(w.pinned)] if p is not None]
        group += [c for c in clusters if c.alive and c.matchable and c not in group
                  and any(matches(w.norm, w.about, r) for r in [c.rep] + [_Rep.of(v) for v in c.wordings])]
        if not group:  # a lesson already archived (say, as harmful) is not added again
            fallback = next((a for a in archived if matches(w.norm, w.about, _Rep.of(a))), None)
            group = [cluster_of(target(fallback.id))] if fallback else []
        if not group:
            clusters.append(_Cluster(_Rep.of(w), wordings=[w]))
            continue
        home = min(group, key=lambda c: c.rep.key)
        for other in group:
            if other is not home and other.alive:
                home.absorb(other)
        home.wordings.append(w)
        if w.norm not in {normalise(i.text) for i in home.items}:  # a wording equal to an item's text IS that item
            home.rep = min(home.rep, _Rep.of(w), key=lambda r: r.key)

    # -- one block of operations per touched cluster -------------------------------------
    blocks: list[tuple[str, list[Operation]]] = []
    for c in clusters:
        if not c.alive:
            continue
        proposals = sum(w.count for w in c.wordings)
        provenance = c.provenance.union(*(w.provenance for w in c.wordings))
        rep = c.rep
        if not c.items:
            if proposals:
                report["items_added"] += 1
                new_id = item_id_for(rep.text, rep.section)
                blocks.append((new_id, [Operation(op="add", item_id=new_id, section=rep.section, text=rep.text,
                                                  about=sorted(rep.about), count=proposals, provenance=sorted(provenance),
                                                  reason="merged")]))
            continue
        if not (c.wordings or c.helpful or c.harmful or provenance or len(c.items) > 1):
            continue
        report["folded_into_existing"] += proposals
        report["items_reinforced"] += proposals > 0
        helpful = sum(i.helpful for i in c.items) + proposals + c.helpful
        harmful = sum(i.harmful for i in c.items) + c.harmful
        provenance |= {p for i in c.items for p in i.provenance}
        archive = rule.archives(helpful, harmful)
        keep = rep.item
        new_id = keep.id if keep else item_id_for(rep.text, rep.section)
        block = []
        for old in sorted(c.items, key=lambda i: i.id):
            if old is not keep:
                report["superseded"] += 1
                if old.status == "active":
                    block.append(Operation(op="archive", item_id=old.id, reason=f"superseded by {new_id}"))
        if keep is None:
            block.append(Operation(op="add", item_id=new_id, section=rep.section, text=rep.text, about=sorted(rep.about),
                                   count=helpful + 1, provenance=sorted(provenance), reason="merged: new representative"))
            if harmful:
                block.append(Operation(op="tag_harmful", item_id=new_id, count=harmful, reason="carried over"))
            was_active, gained = True, True
        else:
            more_helpful, more_harmful = helpful - keep.helpful, harmful - keep.harmful
            if more_helpful or not more_harmful and not set(provenance) <= set(keep.provenance):
                block.append(Operation(op="tag_helpful", item_id=new_id, count=more_helpful, provenance=sorted(provenance)))
            if more_harmful:
                block.append(Operation(op="tag_harmful", item_id=new_id, count=more_harmful, provenance=sorted(provenance)))
            was_active, gained = keep.status == "active", more_helpful > 0
        if archive and was_active:
            report["archived"] += 1
            block.append(Operation(op="archive", item_id=new_id, reason=_why(rule, helpful, harmful)))
        elif not archive and not was_active and gained:
            report["reactivated"] += 1
            block.append(Operation(op="add", item_id=new_id, section=keep.section, text=keep.text, about=keep.about,
                                   count=1, reason="reactivated: counts no longer meet the archive rule"))
        blocks.append((new_id, block))
    touched = {item_id for item_id, _ in blocks}
    for item in active:  # untouched items too, e.g. after the rule was tightened
        if item.id not in touched and owner[item.id].alive and rule.archives(item.helpful, item.harmful):
            report["archived"] += 1
            reason = _why(rule, item.helpful, item.harmful)
            blocks.append((item.id, [Operation(op="archive", item_id=item.id, reason=reason)]))

    out = [op for _, block in sorted(blocks, key=lambda b: b[0]) for op in block]
    report["wordings"] = len(wordings)
    report["duplicates_folded"] = report["adds_in"] - report["items_added"]
    report["operations_out"] = len(out)
    keys = ("reflections", "operations_in", "adds_in", "updates_in", "tags", "archive_requests", "wordings",
            "items_added", "items_reinforced", "folded_into_existing", "duplicates_folded", "superseded",
            "archived", "reactivated", "dropped_unknown_target", "operations_out")
    return MergeResult(out, {k: int(report[k]) for k in keys})


def _why(rule: ArchiveRule, helpful: int, harmful: int) -> str:
    return f"harmful {harmful} >= {rule.min_harmful} and > {rule.ratio:g} x helpful {helpful}"
