"""A batch's distinct lesson texts, and the total order that picks an item's one wording.

See docs/internals/learning.md#merging-a-batchs-operations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from parallax.state.playbook import Operation, PlaybookItem


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


def about_names(names: Iterable[str]) -> frozenset[str]:
    """The named things a lesson is about, normalised; empty names dropped."""
    return frozenset(n for n in (normalise(a) for a in names) if n)


WordingKey = tuple[bool, int, int, str, str]


def canonical_key(text: str, section: str, about: Iterable[str]) -> WordingKey:
    """Total order on wordings; the representative of an item is the minimum."""
    names = about_names(about)
    return (len(names) == 0, len(names), len(normalise(text)), normalise(text), section)


@dataclass
class Wording:
    """One distinct lesson text of the batch (adds, and update proposals, with that text)."""

    norm: str
    text: str
    section: str
    about: frozenset[str]
    count: int = 0
    provenance: set[str] = field(default_factory=set)
    pinned: set[str] = field(default_factory=set)
    """Ids of the items an `update` proposed this text for."""

    @property
    def key(self) -> WordingKey:
        return canonical_key(self.text, self.section, self.about)


def collect_wordings(
    ops: list[Operation], items: dict[str, PlaybookItem], report: Counter[str]
) -> dict[str, Wording]:
    """Normalised text -> Wording, for every add and every update of a known item.

    The same text from several reflections keeps its smallest spelling and section and
    all names. Adds count toward `adds_in`; updates are registered here (so everything is
    embedded in one call) and pinned to their target later.
    """
    wordings: dict[str, Wording] = {}

    def wording(text: str, section: str, about: Iterable[str]) -> Wording:
        norm = normalise(text)
        w = wordings.get(norm)
        if w is None:
            w = wordings[norm] = Wording(norm, text, section, about_names(about))
        else:
            w.text, w.section, w.about = (
                min(w.text, text),
                min(w.section, section),
                w.about | about_names(about),
            )
        return w

    for op in ops:
        if op.op == "add" and normalise(op.text):
            report["adds_in"] += 1
            w = wording(op.text, op.section, op.about)
            w.count += op.count
            w.provenance |= set(op.provenance)
    for op in ops:
        if op.op == "update" and normalise(op.text) and op.item_id in items:
            wording(op.text, items[op.item_id].section, op.about or items[op.item_id].about)
    return wordings
