"""What a document's slices found, merged field by field, keeping only values whose quotes verify.

See docs/internals/runs.md#section-merges-quotes-that-verify.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from parallax.logic.quotes import number_shown, quote_occurs
from parallax.logic.user_schema import items, join, normal, properties, required, set_at, shape
from parallax.state.records import JsonSchema, Provenance


@dataclass
class Found:
    path: str
    """`revenue`, or `segments[]` for an item of a list."""
    value: Any
    quotes: list[str]
    slice_index: int
    branch_id: str
    verified: bool = False
    page: int | None = None

    def record(self, path: str | None = None, conflict: bool | None = None) -> Provenance:
        record: Provenance = {
            "path": path or self.path,
            "value": self.value,
            "branch_id": self.branch_id,
            "quote": " | ".join(q for q in self.quotes if q),
            "page": self.page,
            "verified": self.verified,
            "slice_index": self.slice_index,
        }
        if conflict is not None:
            record["conflict"] = conflict
        return record


@dataclass
class Merged:
    data: dict[str, Any] = field(default_factory=dict)
    provenance: list[Provenance] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    checked: int = 0
    verified: int = 0

    @property
    def dropped(self) -> int:
        return self.checked - self.verified

    def report(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "verified": self.verified,
            "dropped": self.dropped,
            "share_verified": round(self.verified / self.checked, 3) if self.checked else None,
            "conflicts": self.conflicts,
        }


def plain(node: JsonSchema, reported: Any) -> tuple[Any, list[str]]:
    """A reported value without its quotes, and the quotes: {"quote", "value"} -> value,
    recursively."""
    kind = shape(node)
    if kind == "object" and isinstance(reported, dict):
        value: dict[str, Any] = {}
        quotes: list[str] = []
        for name, sub in properties(node).items():
            if reported.get(name) is not None:
                inner, said = plain(sub, reported[name])
                if inner is not None:
                    value[name] = inner
                    quotes += said
        return (value or None), quotes
    if kind == "array" and isinstance(reported, list):
        pairs = [plain(items(node), item) for item in reported]
        return [v for v, _ in pairs if v is not None], [q for _, qs in pairs for q in qs]
    if isinstance(reported, dict) and reported.get("value") is not None:
        return reported["value"], [str(reported.get("quote") or "")]
    return None, []


def collect(
    schema: JsonSchema, data: Any, slice_index: int, branch_id: str, path: str = ""
) -> Iterator[Found]:
    """Every value one slice reported: single values by path, list items one by one."""
    kind = shape(schema)
    if kind == "object" and isinstance(data, dict):
        for name, sub in properties(schema).items():
            if data.get(name) is not None:
                yield from collect(sub, data[name], slice_index, branch_id, join(path, name))
    elif kind == "array" and isinstance(data, list):
        for item in data:
            value, quotes = plain(items(schema), item)
            if value not in (None, [], {}):
                yield Found(f"{path}[]", value, quotes, slice_index, branch_id)
    else:
        value, quotes = plain(schema, data)
        if value is not None:
            yield Found(path, value, quotes, slice_index, branch_id)


def verify(found: Found, slices: list[str], slice_pages: list[list[int]], pages: list[str]) -> None:
    """Check each quote against the value's own slice, and find the page it stands on (counted from
    1)."""
    source = slices[found.slice_index] if 0 <= found.slice_index < len(slices) else ""
    found.verified = bool(found.quotes) and all(quote_occurs(q, source) for q in found.quotes)
    if (
        found.verified
        and isinstance(found.value, int | float)
        and not isinstance(found.value, bool)
    ):
        found.verified = number_shown(found.value, " ".join(found.quotes))
    if found.verified and pages and found.slice_index < len(slice_pages):
        candidates = [
            p
            for p in slice_pages[found.slice_index]
            if 0 < p <= len(pages) and quote_occurs(found.quotes[0], pages[p - 1])
        ]
        exact = " ".join(found.quotes[0].split())
        # a quote on several pages (a title also in the contents) is placed where it stands as
        # copied
        found.page = next(
            (p for p in candidates if exact in " ".join(pages[p - 1].split())),
            candidates[0] if candidates else None,
        )


def merge_found(founds: list[Found]) -> Merged:
    """The object the verified values make, with provenance, conflicts and counts (founds in
    document order)."""
    merged = Merged(checked=len(founds), verified=sum(f.verified for f in founds))
    by_path: dict[str, list[Found]] = {}
    for found in founds:
        if found.verified:
            by_path.setdefault(found.path, []).append(found)
        else:
            merged.provenance.append(found.record())
    for path, group in by_path.items():
        if path.endswith("[]"):
            _union(path[:-2], group, merged)
        else:
            _single(path, group, merged)
    return merged


def _union(path: str, group: list[Found], merged: Merged) -> None:
    kept: dict[str, Found] = {}
    for found in group:
        kept.setdefault(normal(found.value), found)
    set_at(merged.data, path, [f.value for f in kept.values()])
    merged.provenance += [f.record(f"{path}[{i}]") for i, f in enumerate(kept.values())]


def _single(path: str, group: list[Found], merged: Merged) -> None:
    values: dict[str, list[Found]] = {}
    for found in group:
        values.setdefault(normal(found.value), []).append(found)
    if len(values) == 1:
        only = next(iter(values.values()))[0]
        set_at(merged.data, path, only.value)
        merged.provenance.append(only.record())
        return
    merged.conflicts.append(
        {
            "path": path,
            "values": [
                {
                    "value": same[0].value,
                    "pages": sorted({f.page for f in same if f.page is not None}),
                    "slices": sorted({f.slice_index for f in same}),
                    "branch_ids": [f.branch_id for f in same],
                }
                for same in values.values()
            ],
        }
    )
    merged.provenance += [same[0].record(conflict=True) for same in values.values()]


def missing_required(schema: JsonSchema, data: dict[str, Any], path: str = "") -> list[str]:
    """Required fields `data` has no value for (inside objects that are present)."""
    missing: list[str] = []
    for name, sub in properties(schema).items():
        here = join(path, name)
        if data.get(name) is None:
            if name in required(schema):
                missing.append(here)
        elif shape(sub) == "object" and isinstance(data[name], dict):
            missing += missing_required(sub, data[name], here)
    return missing
