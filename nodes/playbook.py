"""Read the current playbook from the LangGraph store and pick what a branch should see.

The store is whatever the runtime brings: SQLite from the CLI, in-memory under
`langgraph dev`, Postgres in a deployment. An absent playbook is version 0 with no items.
"""

from __future__ import annotations

import asyncio

from langgraph.store.base import BaseStore

from prompts.playbook_store import PlaybookStore


async def read_playbook(store: BaseStore | None, tenant: str, name: str) -> tuple[int, list[dict]]:
    """(version, active items) of the tenant's playbook head; (0, []) when there is none yet."""
    if store is None:
        return 0, []
    head = await PlaybookStore(store, tenant=tenant).head(name)
    return head.version, [item.model_dump() for item in head.active]


def within_budget(ranked: list[dict], budget_chars: int) -> list[dict]:
    """The best-ranked items whose texts fit in `budget_chars`, in rank order."""
    chosen, used = [], 0
    for item in ranked:
        if used + len(item["text"]) <= budget_chars:
            chosen.append(item)
            used += len(item["text"])
    return chosen


async def select_items(items: list[dict], texts: list[str], budget_chars: int) -> list[list[dict]]:
    """For each branch text, the most relevant items under the budget.

    A playbook that fits the budget goes whole to every branch. A larger one is ranked
    per branch by embedding similarity to the branch's own text (local MiniLM, in a
    thread so the event loop never blocks), ties broken by helpful count and id.
    """
    if sum(len(i["text"]) for i in items) <= budget_chars:
        return [list(items) for _ in texts]
    from parallax.embeddings import embed

    vectors = await asyncio.to_thread(embed, [i["text"] for i in items] + list(texts))
    item_vectors, text_vectors = vectors[: len(items)], vectors[len(items) :]
    selections = []
    for text_vector in text_vectors:
        scores = item_vectors @ text_vector
        order = sorted(range(len(items)), key=lambda k: (-round(float(scores[k]), 6), -items[k].get("helpful", 0), items[k]["id"]))
        selections.append(within_budget([items[k] for k in order], budget_chars))
    return selections
