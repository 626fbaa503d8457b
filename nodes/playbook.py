"""Read the current playbook from the LangGraph store and pick what a branch should see.

The store is whatever the runtime brings: SQLite from the CLI, in-memory under
`langgraph dev`, Postgres in a deployment. An absent playbook is version 0 with no items.
"""

from __future__ import annotations

import re

from langgraph.store.base import BaseStore


def namespace(name: str) -> tuple[str, ...]:
    return ("playbooks", name)


async def read_playbook(store: BaseStore | None, name: str) -> tuple[int, list[dict]]:
    """(version, active items) of the playbook's head; (0, []) when there is none yet."""
    if store is None:
        return 0, []
    head = await store.aget(namespace(name), "head")
    if head is None:
        return 0, []
    items = [i for i in head.value.get("items", []) if i.get("status", "active") == "active"]
    return int(head.value.get("version", 0)), items


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]{3,}", text.lower()))


def relevant_items(items: list[dict], text: str, budget_chars: int) -> list[dict]:
    """Items sharing the most words with `text`, best first, within a character budget."""
    words = _words(text)
    ranked = sorted(items, key=lambda i: (-len(words & _words(i["text"])), -i.get("helpful", 0), i["id"]))
    chosen, used = [], 0
    for item in ranked:
        if used + len(item["text"]) > budget_chars:
            continue
        chosen.append(item)
        used += len(item["text"])
    return chosen
