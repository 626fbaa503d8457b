"""The playbook: items, delta operations, versions, and how operations apply.

Every change is a delta operation, so it can be merged, replayed, diffed and rolled back;
`apply_operations` is pure and deterministic.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from parallax.state.records import PlaybookItemData

OpKind = Literal["add", "update", "tag_helpful", "tag_harmful", "archive"]


class PlaybookItem(BaseModel):
    id: str
    section: str = "general"
    text: str
    helpful: int = 0
    harmful: int = 0
    provenance: list[str] = Field(
        default_factory=list, description="reflection and trace ids it came from"
    )
    about: list[str] = Field(default_factory=list, description="named things the lesson is about")
    created_in: int = 0
    changed_in: int = 0
    status: Literal["active", "archived"] = "active"

    def as_data(self) -> PlaybookItemData:
        """The item as it travels in a run: a plain dict (`model_dump()`),
        checkpoint-serialisable."""
        return cast(PlaybookItemData, self.model_dump())


class Operation(BaseModel):
    """One delta. `item_id` names the target for everything but `add`."""

    op: OpKind
    item_id: str | None = None
    section: str = "general"
    text: str = ""
    about: list[str] = Field(default_factory=list)
    count: int = 1
    provenance: list[str] = Field(default_factory=list)
    reason: str = ""


class PlaybookVersion(BaseModel):
    """An immutable version. History is linear: each version names its parent."""

    name: str
    version: int
    parent: int | None
    items: list[PlaybookItem]
    operations: list[Operation] = Field(default_factory=list)
    created_by: str = ""
    created_at: str = ""
    gate: dict[str, Any] = Field(default_factory=dict[str, Any])
    accepted: bool = True
    note: str = ""

    @property
    def active(self) -> list[PlaybookItem]:
        return [i for i in self.items if i.status == "active"]


def item_id_for(text: str, section: str) -> str:
    """Content-derived id, so the same lesson gets the same id whatever order it arrives in."""
    digest = hashlib.sha1(
        f"{section}\n{' '.join(text.lower().split())}".encode(), usedforsecurity=False
    ).hexdigest()
    return f"pb-{digest[:10]}"


def _union(a: list[str], b: list[str]) -> list[str]:
    return sorted(set(a) | set(b))


def apply_operations(
    items: list[PlaybookItem], operations: list[Operation], version: int
) -> list[PlaybookItem]:
    """Apply operations in order to copies of `items`; unknown targets are skipped.

    An `add` whose id already exists folds into that item (counts and provenance
    united), which is what makes replaying operations on a newer head safe.
    """
    by_id = {item.id: item.model_copy(deep=True) for item in items}
    order = [item.id for item in items]
    for op in operations:
        if op.op == "add":
            item_id = op.item_id or item_id_for(op.text, op.section)
            if item_id in by_id:
                item = by_id[item_id]
                item.helpful += max(0, op.count - 1)
                item.provenance = _union(item.provenance, op.provenance)
                item.about = _union(item.about, op.about)
                item.status, item.changed_in = "active", version
            else:
                by_id[item_id] = PlaybookItem(
                    id=item_id,
                    section=op.section,
                    text=op.text,
                    helpful=max(0, op.count - 1),
                    provenance=sorted(set(op.provenance)),
                    about=sorted(set(op.about)),
                    created_in=version,
                    changed_in=version,
                )
                order.append(item_id)
            continue
        target = by_id.get(op.item_id or "")
        if target is None:
            continue
        item = target
        if op.op == "update":
            item.text = op.text or item.text
            item.about = _union(item.about, op.about)
        elif op.op == "tag_helpful":
            item.helpful += op.count
        elif op.op == "tag_harmful":
            item.harmful += op.count
        elif op.op == "archive":
            item.status = "archived"
        item.provenance = _union(item.provenance, op.provenance)
        item.changed_in = version
    return [by_id[i] for i in order]
