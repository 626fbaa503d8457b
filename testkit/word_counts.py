"""A stand-in embedder for learn tests: normalised counts of a small vocabulary.

Why: the lesson checks and the merge compare lessons by embedding; a test that wants two lessons
to be near or far chooses their words, and needs no model on disk to do it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def word_counts(vocabulary: Sequence[str]) -> Callable[[list[str]], np.ndarray]:
    """An embedder: each text becomes the unit vector of how often it holds each word of
    `vocabulary`."""
    words = sorted(set(vocabulary))

    def embed(texts: list[str]) -> np.ndarray:
        rows = [[t.lower().count(w) for w in words] for t in texts]
        m = np.array(rows, dtype=float) + 1e-6
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    return embed
