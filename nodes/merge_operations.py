"""Merge the delta operations of a whole learn batch into one operation list, deterministically.

Why: each reflection is curated on its own (no model call ever sees many reflections), so
a batch of a hundred runs arrives as a hundred small operation lists that repeat the same
lessons in different words. This merge folds them without a model call, and the result
must not depend on the order of the operations NOR on how the reflections were split into
batches, so that a playbook learned at batch 100 holds the same lessons as at batch 1.

How (DESIGN.md "What we measured about merging lessons": raw similarity does not separate
lessons, so a single threshold either merges cousins or keeps paraphrases apart):

* Lessons are compared by embedding similarity of the curator's canonical `text`, with a
  threshold that depends on the `about` names: the same names -> `same_about` (lower);
  names on both sides but none shared ("gross margin" vs "operating margin") -> `conflict`
  (near-identical only); otherwise `threshold`. Identical normalised text always matches.
* Every item is represented by ONE wording, the canonical minimum of its wordings under a
  total order (`canonical_key`: names something, fewest names, shortest, alphabetical).
  A minimum is associative, so it is the same whichever batch a wording arrived in. The
  item id is `item_id_for(representative)`; when a later batch brings a smaller wording,
  the old item is archived ("superseded") and its counts and provenance move to the new id.
* A new wording folds into the best-matching existing item (active items first; archived
  ones only if no active item matches, so a lesson archived as harmful is not re-added);
  the remaining wordings are clustered leader-style in canonical order: each joins the
  best-matching leader, else leads. Every member of an item therefore matches its
  representative, which is exactly what a later batch can check. When the match relation
  is an equivalence on the data (well-separated lessons), the final playbook is identical
  for any order and any batching; when it is not (a ~ b ~ c but a !~ c), results can differ
  by where the chain is cut, never by the order inside a batch.
* Counts are sums: a lesson proposed n times has helpful n-1 (apply_operations' `add`
  semantics); a fold into an existing item is `tag_helpful` with the number of proposals.
  A curator's `archive` request is `archive_votes` harmful votes, and an item's status is a
  pure function of its summed counts (`ArchiveRule`), so archiving is batch-independent too.
* `update` proposes a wording for its target; it competes for the representative like any
  other wording (no "last writer wins", which would depend on arrival order).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from parallax.embeddings import Embedder
from state.playbook import Operation, PlaybookItem, item_id_for

DEFAULT_THRESHOLD = 0.80
SAME_ABOUT_THRESHOLD = 0.55
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


def _key(item: PlaybookItem) -> tuple:
    return canonical_key(item.text, item.section, item.about)


def _about(names) -> frozenset[str]:
    return frozenset(n for n in (normalise(a) for a in names) if n)


@dataclass
class _Wording:
    """One distinct lesson text from the batch (adds and update proposals with that text)."""

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
class _Cluster:
    item: PlaybookItem | None
    members: list = field(default_factory=list)
    helpful: int = 0
    harmful: int = 0
    provenance: set = field(default_factory=set)


def merge_operations(
    op_lists: list[list[Operation]],
    existing: list[PlaybookItem],
    *,
    embed: Embedder,
    threshold: float | None = None,
    same_about_threshold: float = SAME_ABOUT_THRESHOLD,
    conflict_threshold: float = CONFLICT_THRESHOLD,
    rule: ArchiveRule = ArchiveRule(),
) -> MergeResult:
    """One operation list for `apply_operations(existing, ...)`, plus counts for the guard."""
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    ops = [op for ops in op_lists for op in ops]
    items = {i.id: i for i in existing}
    report = defaultdict(int, reflections=len(op_lists), operations_in=len(ops))

    def limit(a: frozenset, b: frozenset) -> float:
        if a and b:
            return same_about_threshold if a == b else threshold if a & b else conflict_threshold
        return threshold

    # -- distinct wordings (exact duplicates united first) --------------------------------
    wordings: dict[str, _Wording] = {}

    def wording(text: str, section: str, about) -> _Wording:
        norm = normalise(text)
        w = wordings.get(norm)
        if w is None:
            w = wordings[norm] = _Wording(text, section, _about(about))
        else:  # same text from several reflections: keep the smallest spelling, union the names
            w.text, w.section, w.about = min(w.text, text), min(w.section, section), w.about | _about(about)
        return w

    for op in ops:
        if op.op == "add" and normalise(op.text):
            report["adds_in"] += 1
            w = wording(op.text, op.section, op.about)
            w.count += op.count
            w.provenance |= set(op.provenance)

    # -- targets: an archived item that a matching active item replaced gets redirected ----
    texts = sorted(wordings) + sorted({normalise(i.text) for i in existing} - set(wordings))
    vectors = dict(zip(texts, embed(texts))) if texts else {}
    active = sorted((i for i in existing if i.status == "active"), key=lambda i: i.id)

    def sim(a: str, b: str) -> float:
        return 1.0 if normalise(a) == normalise(b) else float(np.dot(vectors[normalise(a)], vectors[normalise(b)]))

    def matches(text: str, about: frozenset, item: PlaybookItem) -> bool:
        return normalise(text) == normalise(item.text) or sim(text, item.text) >= limit(about, _about(item.about))

    archived = sorted((i for i in existing if i.status != "active"), key=lambda i: (_key(i), i.id))

    def home(text: str, about: frozenset, below: tuple | None = None, skip: str = "") -> PlaybookItem | None:
        """Best-matching active item; else the canonical-first matching archived one."""
        ok = [a for a in active if a.id != skip and (below is None or _key(a) < below) and matches(text, about, a)]
        if ok:
            return min(ok, key=lambda a: (-sim(text, a.text), a.id))
        return next((a for a in archived if a.id != skip and (below is None or _key(a) < below)
                     and matches(text, about, a)), None)

    def target(item_id: str | None) -> PlaybookItem | None:
        """The item an op means; an archived item that a smaller matching wording superseded redirects to it."""
        item = items.get(item_id or "")
        if item is None or item.status == "active":
            return item
        return home(item.text, _about(item.about), below=_key(item), skip=item.id) or item

    clusters: dict[str, _Cluster] = {}

    def cluster_of(item: PlaybookItem) -> _Cluster:
        return clusters.setdefault(item.id, _Cluster(item))

    for op in ops:
        if op.op == "add":
            continue
        item = target(op.item_id)
        if item is None:
            report["dropped_unknown_target"] += 1
            continue
        c = cluster_of(item)
        c.provenance |= set(op.provenance)
        if op.op == "tag_helpful":
            report["tags"] += 1
            c.helpful += op.count
        elif op.op == "tag_harmful":
            report["tags"] += 1
            c.harmful += op.count
        elif op.op == "archive":
            report["archive_requests"] += 1
            c.harmful += rule.archive_votes * op.count
        elif op.op == "update":
            report["updates_in"] += 1
            if normalise(op.text):
                w = wording(op.text, item.section, op.about or item.about)
                w.provenance |= set(op.provenance)
                w.pinned.add(item.id)
    if any(normalise(w.text) not in vectors for w in wordings.values()):  # update wordings
        fresh = sorted(n for n in wordings if n not in vectors)
        vectors.update(zip(fresh, embed(fresh)))

    # -- fold wordings into existing items, then cluster the rest leader-style --------------
    by_text: dict[str, PlaybookItem] = {}
    for i in sorted(existing, key=lambda i: (i.status != "active", _key(i), i.id)):
        by_text.setdefault(normalise(i.text), i)
    leaders: list[_Cluster] = []
    for norm in sorted(wordings, key=lambda n: wordings[n].key):
        w = wordings[norm]
        found = by_text.get(norm)
        if found is None and w.pinned:
            found = min((items[p] for p in w.pinned), key=lambda i: (_key(i), i.id))
        if found is None:
            found = home(w.text, w.about)
        elif found.status != "active":  # the exact text of a superseded item belongs to its heir
            found = target(found.id)
        if found is not None:
            cluster_of(found).members.append(w)
            report["items_reinforced_adds"] += w.count
            continue
        scored = [(-sim(w.text, c.members[0].text), i) for i, c in enumerate(leaders)
                  if sim(w.text, c.members[0].text) >= limit(w.about, c.members[0].about)]
        if scored:
            leaders[min(scored)[1]].members.append(w)
        else:
            leaders.append(_Cluster(None, [w]))

    # -- emit operations, one item at a time in id order ------------------------------------
    out: list[Operation] = []
    for c in leaders:
        rep = c.members[0]
        count = sum(w.count for w in c.members)
        if count == 0:  # only update proposals for an unknown target: nothing to add
            continue
        report["items_added"] += 1
        out.append(Operation(op="add", item_id=item_id_for(rep.text, rep.section), section=rep.section, text=rep.text,
                             about=sorted(rep.about), count=count,
                             provenance=sorted(set().union(*(w.provenance for w in c.members))), reason="merged"))
    reinforced = 0
    for item_id in sorted(clusters):
        c = clusters[item_id]
        item = c.item
        proposals = sum(w.count for w in c.members)
        reinforced += proposals > 0
        provenance = sorted(c.provenance.union(*(w.provenance for w in c.members)))
        helpful, harmful = item.helpful + proposals + c.helpful, item.harmful + c.harmful
        archive = rule.archives(helpful, harmful)
        rep = min((w for w in c.members if normalise(w.text) != normalise(item.text)), key=lambda w: w.key, default=None)
        if rep is not None and rep.key < _key(item):
            new_id = item_id_for(rep.text, rep.section)
            report["superseded"] += 1
            if item.status == "active":
                out.append(Operation(op="archive", item_id=item.id, reason=f"superseded by {new_id}"))
            out.append(Operation(op="add", item_id=new_id, section=rep.section, text=rep.text, about=sorted(rep.about),
                                 count=helpful + 1, provenance=sorted(set(item.provenance) | set(provenance)),
                                 reason=f"supersedes {item.id}"))
            if harmful:
                out.append(Operation(op="tag_harmful", item_id=new_id, count=harmful, reason=f"carried from {item.id}"))
            if archive:
                report["archived"] += 1
                out.append(Operation(op="archive", item_id=new_id, reason=_why(rule, helpful, harmful)))
            continue
        if proposals + c.helpful:
            out.append(Operation(op="tag_helpful", item_id=item.id, count=proposals + c.helpful, provenance=provenance))
        if c.harmful:
            out.append(Operation(op="tag_harmful", item_id=item.id, count=c.harmful, provenance=provenance))
        if not (proposals + c.helpful + c.harmful) and provenance:
            out.append(Operation(op="update", item_id=item.id, provenance=provenance, reason="wording proposal kept as provenance"))
        if archive and item.status == "active":
            report["archived"] += 1
            out.append(Operation(op="archive", item_id=item.id, reason=_why(rule, helpful, harmful)))
        elif not archive and item.status != "active" and (proposals + c.helpful):
            report["reactivated"] += 1
            out.append(Operation(op="add", item_id=item.id, section=item.section, text=item.text, about=item.about,
                                 count=1, reason="reactivated: counts no longer meet the archive rule"))
    for item in active:  # e.g. the rule was tightened since these counts were reached
        if item.id not in clusters and rule.archives(item.helpful, item.harmful):
            report["archived"] += 1
            out.append(Operation(op="archive", item_id=item.id, reason=_why(rule, item.helpful, item.harmful)))

    report["items_reinforced"] = reinforced
    report["folded_into_existing"] = report.pop("items_reinforced_adds", 0)
    report["wordings"] = len(wordings)
    report["duplicates_folded"] = report["adds_in"] - report["items_added"]
    report["operations_out"] = len(out)
    keys = ("reflections", "operations_in", "adds_in", "updates_in", "tags", "archive_requests", "wordings",
            "items_added", "items_reinforced", "folded_into_existing", "duplicates_folded", "superseded",
            "archived", "reactivated", "dropped_unknown_target", "operations_out")
    return MergeResult(out, {k: int(report.get(k, 0)) for k in keys})


def _why(rule: ArchiveRule, helpful: int, harmful: int) -> str:
    return f"harmful {harmful} >= {rule.min_harmful} and > {rule.ratio:g} x helpful {helpful}"
