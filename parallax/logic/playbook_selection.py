"""The playbook items each branch sees, within a character budget.

See docs/internals/learning.md#which-items-a-branch-sees.
"""

from __future__ import annotations

import asyncio
import re

from parallax.runtime import embeddings
from parallax.state.context import Embedder
from parallax.state.records import PlaybookItemData

RETRIEVAL_CHARS = 200
SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def retrieval_text(text: str, limit: int = RETRIEVAL_CHARS) -> str:
    """The leading sentences of `text` that fit in `limit` characters (the first one cut to fit)."""
    sentences = SENTENCE_END.split(text.strip())
    kept = sentences[0][:limit]
    for sentence in sentences[1:]:
        if len(kept) + 1 + len(sentence) > limit:
            break
        kept += " " + sentence
    return kept


def within_budget(ranked: list[PlaybookItemData], budget_chars: int) -> list[PlaybookItemData]:
    """The best-ranked items whose texts fit in `budget_chars`, in rank order."""
    chosen: list[PlaybookItemData] = []
    used = 0
    for item in ranked:
        if used + len(item["text"]) <= budget_chars:
            chosen.append(item)
            used += len(item["text"])
    return chosen


async def select_items(
    items: list[PlaybookItemData],
    texts: list[str],
    budget_chars: int,
    embed: Embedder | None = None,
) -> list[list[PlaybookItemData]]:
    """For each branch text, the most relevant items under the budget.

    Embedding runs in a thread so the event loop never blocks; `embed` defaults to the
    local MiniLM (Context.embedder overrides it).
    """
    if sum(len(i["text"]) for i in items) <= budget_chars:
        return [list(items) for _ in texts]
    # items as the merge embeds them (lower case, single spaces): the model is uncased, so the
    # vectors are the same, and the merge has already cached them
    item_texts = [" ".join(i["text"].lower().split()) for i in items]
    vectors = await asyncio.to_thread(embed or embeddings.embed, item_texts + list(texts))
    item_vectors, text_vectors = vectors[: len(items)], vectors[len(items) :]
    selections = []
    for text_vector in text_vectors:
        scores = item_vectors @ text_vector
        order = sorted(
            range(len(items)),
            key=lambda k: (
                -round(float(scores[k]), 6),
                -items[k].get("helpful", 0),
                items[k]["id"],
            ),
        )
        selections.append(within_budget([items[k] for k in order], budget_chars))
    return selections
