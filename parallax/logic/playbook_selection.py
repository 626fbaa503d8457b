"""Pick the playbook items each branch should see, within a character budget.

A playbook that fits the budget goes whole to every branch. A larger one is ranked per
branch by embedding similarity to the branch's own text, ties broken by helpful count and
id, so the same texts always get the same items.
"""

from __future__ import annotations

import asyncio

from parallax.runtime import embeddings
from parallax.state.context import Embedder


def within_budget(ranked: list[dict], budget_chars: int) -> list[dict]:
    """The best-ranked items whose texts fit in `budget_chars`, in rank order."""
    chosen, used = [], 0
    for item in ranked:
        if used + len(item["text"]) <= budget_chars:
            chosen.append(item)
            used += len(item["text"])
    return chosen


async def select_items(items: list[dict], texts: list[str], budget_chars: int,
                       embed: Embedder | None = None) -> list[list[dict]]:
    """For each branch text, the most relevant items under the budget.

    Embedding runs in a thread so the event loop never blocks; `embed` defaults to the
    local MiniLM (Context.embedder overrides it).
    """
    if sum(len(i["text"]) for i in items) <= budget_chars:
        return [list(items) for _ in texts]
    vectors = await asyncio.to_thread(embed or embeddings.embed, [i["text"] for i in items] + list(texts))
    item_vectors, text_vectors = vectors[: len(items)], vectors[len(items) :]
    selections = []
    for text_vector in text_vectors:
        scores = item_vectors @ text_vector
        order = sorted(range(len(items)),
                       key=lambda k: (-round(float(scores[k]), 6), -items[k].get("helpful", 0), items[k]["id"]))
        selections.append(within_budget([items[k] for k in order], budget_chars))
    return selections
