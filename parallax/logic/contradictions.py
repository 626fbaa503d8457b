"""Plan mode's semantic layer: findings that contradict each other, found with few model calls.

See docs/internals/plans.md#finishing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from parallax.logic.quotes import normalise
from parallax.state.context import Embedder

SIMILAR = 0.55
"""Cosine similarity from which two findings are about the same thing (all-MiniLM-L6-v2)."""
Judge = Callable[[str, str], Awaitable[bool | None]]
"""`await judge(a, b)` -> True if they contradict, False if not, None if the call failed."""


def candidate_pairs(
    findings: list[dict[str, Any]], vectors: np.ndarray, cap: int, similar: float = SIMILAR
) -> list[tuple[int, int, float]]:
    """(i, j, similarity) of findings from different sources, most similar first, at most `cap`.
    `vectors`: one unit vector per finding's point."""
    if len(findings) < 2 or cap < 1:
        return []
    similarity = np.asarray(vectors, dtype=float) @ np.asarray(vectors, dtype=float).T
    pairs = []
    for i in range(len(findings)):
        for j in range(i + 1, len(findings)):
            same_source = findings[i].get("source") == findings[j].get("source")
            same_text = normalise(findings[i]["point"]) == normalise(findings[j]["point"])
            if not same_source and not same_text and similarity[i, j] >= similar:
                pairs.append((i, j, round(float(similarity[i, j]), 3)))
    return sorted(pairs, key=lambda p: -p[2])[:cap]


async def find_contradictions(
    findings: list[dict[str, Any]], embed: Embedder, judge: Judge, cap: int
) -> dict[str, Any]:
    """The semantic layer's report: candidates judged, pairs flagged, judge calls that failed."""
    if len(findings) < 2 or cap < 1:
        return {
            "findings": len(findings),
            "candidates": 0,
            "judged": 0,
            "failed_calls": 0,
            "flagged": [],
        }
    vectors = await asyncio.to_thread(embed, [f["point"] for f in findings])
    pairs = candidate_pairs(findings, vectors, cap)
    verdicts = await asyncio.gather(
        *(judge(findings[i]["point"], findings[j]["point"]) for i, j, _ in pairs)
    )
    flagged = [
        {"a": findings[i], "b": findings[j], "similarity": s}
        for (i, j, s), verdict in zip(pairs, verdicts, strict=True)
        if verdict
    ]
    return {
        "findings": len(findings),
        "candidates": len(pairs),
        "judged": sum(v is not None for v in verdicts),
        "failed_calls": sum(v is None for v in verdicts),
        "flagged": flagged,
    }
