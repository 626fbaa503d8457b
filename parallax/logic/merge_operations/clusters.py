"""Existing items and new wordings grouped into lessons (clusters), each with one representative.

See docs/internals/learning.md#merging-a-batchs-operations.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from parallax.logic.merge_operations.matching import Matcher
from parallax.logic.merge_operations.wordings import Wording, about_names, canonical_key, normalise
from parallax.state.playbook import Operation, PlaybookItem


@dataclass
class Rep:
    """A representative wording: an existing item's text, or a new wording."""

    key: tuple[bool, int, int, str, str, str]
    norm: str
    text: str
    section: str
    about: frozenset[str]
    item: PlaybookItem | None = None

    @classmethod
    def of(cls, x: PlaybookItem | Wording) -> Rep:
        item = x if isinstance(x, PlaybookItem) else None
        return cls(
            canonical_key(x.text, x.section, x.about) + ((item.id,) if item else ("",)),
            normalise(x.text),
            x.text,
            x.section,
            about_names(x.about),
            item,
        )


@dataclass(eq=False)
class Cluster:
    """Existing items and new wordings that are one lesson; `rep` is their canonical minimum."""

    rep: Rep
    items: list[PlaybookItem] = field(default_factory=list)
    wordings: list[Wording] = field(default_factory=list)
    helpful: int = 0
    harmful: int = 0
    provenance: set[str] = field(default_factory=set)
    alive: bool = True

    @property
    def matchable(self) -> bool:  # archived-only clusters are a fallback, never bridged
        return not self.items or any(i.status == "active" for i in self.items)

    def absorb(self, other: Cluster) -> None:
        self.items += other.items
        self.wordings += other.wordings
        self.helpful, self.harmful = self.helpful + other.helpful, self.harmful + other.harmful
        self.provenance |= other.provenance
        self.rep = min(self.rep, other.rep, key=lambda r: r.key)
        other.alive = False


class Clusters:
    """The clusters of one merge, over the existing items and this batch's wordings."""

    def __init__(self, existing: list[PlaybookItem], matcher: Matcher) -> None:
        self.items = {i.id: i for i in existing}
        self.active = sorted((i for i in existing if i.status == "active"), key=lambda i: i.id)
        self.archived = sorted(
            (i for i in existing if i.status != "active"), key=lambda i: Rep.of(i).key
        )
        self.matcher = matcher
        self.all: list[Cluster] = []
        self.owner: dict[str, Cluster] = {}
        self.by_text: dict[str, PlaybookItem] = {}
        for i in sorted(existing, key=lambda i: (i.status != "active", Rep.of(i).key)):
            self.by_text.setdefault(normalise(i.text), i)
        for item in self.active:
            self.cluster_of(item)

    def matches(self, norm: str, about: frozenset[str], rep: Rep) -> bool:
        return self.matcher.matches(norm, about, rep.norm, rep.about)

    def cluster_of(self, item: PlaybookItem) -> Cluster:
        while item.id in self.owner and not self.owner[item.id].alive:  # follow absorptions
            self.owner[item.id] = next(
                c for c in self.all if c.alive and any(i.id == item.id for i in c.items)
            )
        if item.id not in self.owner:
            self.owner[item.id] = Cluster(Rep.of(item), [item])
            self.all.append(self.owner[item.id])
        return self.owner[item.id]

    def known_target(self, item: PlaybookItem) -> PlaybookItem:
        """`target` of an item of this playbook (which always has one)."""
        found = self.target(item.id)
        return found if found is not None else item

    def target(self, item_id: str | None) -> PlaybookItem | None:
        """The item an op means; an archived item superseded by a matching smaller wording redirects
        to it."""
        item = self.items.get(item_id or "")
        if item is None or item.status == "active":
            return item
        below, norm, about = Rep.of(item).key, normalise(item.text), about_names(item.about)
        heirs = [
            a for a in self.active if Rep.of(a).key < below and self.matches(norm, about, Rep.of(a))
        ]
        heirs = heirs or [
            a
            for a in self.archived
            if a.id != item.id and Rep.of(a).key < below and self.matches(norm, about, Rep.of(a))
        ]
        return (
            min(heirs, key=lambda a: (-self.matcher.sim(norm, normalise(a.text)), a.id))
            if heirs
            else item
        )

    def apply(
        self, op: Operation, wordings: dict[str, Wording], archive_votes: int, report: Counter[str]
    ) -> None:
        """A tag, archive request or update lands on its item's cluster; an unknown target is
        dropped."""
        item = self.target(op.item_id)
        if item is None:
            report["dropped_unknown_target"] += 1
            return
        c = self.cluster_of(item)
        c.provenance |= set(op.provenance)
        if op.op in ("tag_helpful", "tag_harmful"):
            report["tags"] += 1
            c.helpful += op.count if op.op == "tag_helpful" else 0
            c.harmful += op.count if op.op == "tag_harmful" else 0
        elif op.op == "archive":
            report["archive_requests"] += 1
            c.harmful += archive_votes * op.count
        elif op.op == "update":
            report["updates_in"] += 1
            if normalise(op.text):
                w = wordings[normalise(op.text)]
                w.provenance |= set(op.provenance)
                w.pinned.add(item.id)

    def place(self, w: Wording) -> None:
        """Join `w` to every cluster it matches (bridging them), or start a cluster of its own."""
        group = [
            self.cluster_of(self.known_target(p) if p.status != "active" else p)
            for p in [self.by_text.get(w.norm)] + [self.items[i] for i in sorted(w.pinned)]
            if p is not None
        ]
        group += [
            c
            for c in self.all
            if c.alive
            and c.matchable
            and c not in group
            and any(
                self.matches(w.norm, w.about, r) for r in [c.rep] + [Rep.of(v) for v in c.wordings]
            )
        ]
        if not group:  # a lesson already archived (say, as harmful) is not added again
            fallback = next(
                (a for a in self.archived if self.matches(w.norm, w.about, Rep.of(a))), None
            )
            group = [self.cluster_of(self.known_target(fallback))] if fallback else []
        if not group:
            self.all.append(Cluster(Rep.of(w), wordings=[w]))
            return
        home = min(group, key=lambda c: c.rep.key)
        for other in group:
            if other is not home and other.alive:
                home.absorb(other)
        home.wordings.append(w)
        if w.norm not in {
            normalise(i.text) for i in home.items
        }:  # a wording equal to an item's text IS that item
            home.rep = min(home.rep, Rep.of(w), key=lambda r: r.key)
