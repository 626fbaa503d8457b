"""Playbook exports (JSON, Markdown), imports and diffs.

See docs/internals/storage.md#playbooks for the Markdown format.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from parallax.runtime.storage.namespaces import StoreError
from parallax.state.playbook import PlaybookItem, PlaybookVersion, item_id_for

DIFF_FIELDS = ("text", "section", "helpful", "harmful", "status")
MD_META = re.compile(r"^  <!-- pb: (\{.*\}) -->$")
MD_HEAD = re.compile(r"^<!-- parallax-playbook: (\{.*\}) -->$")


def diff_items(before: list[PlaybookItem], after: list[PlaybookItem]) -> dict[str, Any]:
    """Added items, changed ones (before/after of the fields that differ) and archived ones
    (active before, archived or gone after). Used for version diffs and the approval prompt."""
    old, new = {i.id: i for i in before}, {i.id: i for i in after}
    added = [i.model_dump(mode="json") for i in after if i.id not in old]
    archived = [
        i.model_dump(mode="json")
        for i in before
        if i.status == "active" and (i.id not in new or new[i.id].status == "archived")
    ]
    archived_ids = {i["id"] for i in archived}
    changed = []
    for item in after:
        if item.id in old and item.id not in archived_ids:
            fields = [f for f in DIFF_FIELDS if getattr(old[item.id], f) != getattr(item, f)]
            if fields:
                changed.append(
                    {
                        "id": item.id,
                        "fields": fields,
                        "before": {f: getattr(old[item.id], f) for f in fields},
                        "after": {f: getattr(item, f) for f in fields},
                    }
                )
    return {"added": added, "changed": changed, "archived": archived}


def to_markdown(pv: PlaybookVersion) -> str:
    """The Markdown export, readable and importable (docs/internals/storage.md#playbooks)."""
    meta = {
        "name": pv.name,
        "version": pv.version,
        "parent": pv.parent,
        "created_at": pv.created_at,
    }
    lines = [
        f"# Playbook `{pv.name}`, version {pv.version}",
        f"<!-- parallax-playbook: {json.dumps(meta)} -->",
    ]
    section = None
    for item in pv.items:
        if item.section != section:
            section = item.section
            lines += ["", f"## {section}", ""]
        text = ("[archived] " if item.status == "archived" else "") + item.text
        first, *rest = text.split("\n")
        lines.append(f"- {first}")
        lines += [f"  {line}" for line in rest]
        fields = item.model_dump(mode="json", exclude={"text"})
        lines.append(f"  <!-- pb: {json.dumps(fields, ensure_ascii=False)} -->")
    return "\n".join(lines) + "\n"


def _from_markdown(text: str) -> list[dict[str, Any]]:
    items, section, lines, n = [], "general", text.split("\n"), 0
    while n < len(lines):
        line = lines[n]
        n += 1
        if line.startswith("## "):
            section = line[3:].strip() or "general"
        elif line.startswith("- "):
            body, meta = [line[2:]], None
            while n < len(lines) and lines[n].startswith("  "):
                if m := MD_META.match(lines[n]):
                    try:
                        meta = json.loads(m.group(1))
                    except json.JSONDecodeError as exc:
                        raise StoreError(
                            f"line {n + 1}: the item comment is not valid JSON ({exc.msg}): "
                            "fix or delete it"
                        ) from None
                else:
                    body.append(lines[n][2:])
                n += 1
            item_text = "\n".join(body)
            meta = meta or {"section": section}
            if meta.get("status") == "archived" and item_text.startswith("[archived] "):
                item_text = item_text[len("[archived] ") :]
            meta.setdefault("id", item_id_for(item_text, meta.get("section", section)))
            items.append({**meta, "text": item_text})
    return items


def parse_playbook(text: str) -> list[PlaybookItem]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StoreError(
                f"not valid JSON (line {exc.lineno}: {exc.msg}): import a `parallax playbook"
                " export` file"
            ) from None
        raw = data.get("items") if isinstance(data, dict) else data
        if not isinstance(raw, list):
            raise StoreError(
                'the JSON has no "items" list: import a `parallax playbook export` file'
            )
    elif stripped.startswith("#") or stripped.startswith("- ") or MD_HEAD.search(stripped):
        raw = _from_markdown(text)
    else:
        raise StoreError(
            "neither JSON nor the playbook Markdown: import a `parallax playbook export` file"
        )
    items = []
    for n, raw_item in enumerate(raw, start=1):
        try:
            items.append(PlaybookItem.model_validate(raw_item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "item"
            raise StoreError(
                f"item {n}: {where}: {first['msg']}: fix the file and import again"
            ) from None
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise StoreError(f"item id {item.id!r} appears twice: give each item its own id")
        seen.add(item.id)
    return items
