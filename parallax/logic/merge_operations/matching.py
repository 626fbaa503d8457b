"""When two lesson texts are one lesson: embedding similarity against a bar chosen by their names.

See docs/internals/learning.md#merging-a-batchs-operations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from parallax.state.context import Embedder

DEFAULT_THRESHOLD = 0.80
SAME_ABOUT_THRESHOLD = 0.50
CONFLICT_THRESHOLD = 0.95


class Similarities:
    """Cosine similarities of this batch's wordings against every text, from one embedding call.

    Rows are only the batch's wordings (wordings x everything); a similarity between two
    existing items is computed on demand.
    """

    def __init__(self, wording_norms: list[str], item_norms: set[str], embed: Embedder) -> None:
        norms = sorted(set(wording_norms) | item_norms)
        self.index = {n: k for k, n in enumerate(norms)}
        self.vectors = (
            np.asarray(embed(norms), dtype=np.float32) if norms else np.zeros((0, 1), np.float32)
        )
        ordered = sorted(wording_norms)
        self.rows = {n: k for k, n in enumerate(ordered)}
        self.block = (
            self.vectors[[self.index[n] for n in ordered]] @ self.vectors.T
            if self.rows
            else np.zeros((0, len(norms)))
        )

    def __call__(self, a: str, b: str) -> float:
        if a in self.rows:
            return float(self.block[self.rows[a], self.index[b]])
        if b in self.rows:
            return float(self.block[self.rows[b], self.index[a]])
        return float(self.vectors[self.index[a]] @ self.vectors[self.index[b]])


@dataclass(frozen=True)
class Bars:
    threshold: float = DEFAULT_THRESHOLD
    same_about: float = SAME_ABOUT_THRESHOLD
    conflict: float = CONFLICT_THRESHOLD

    def bar(self, a: frozenset[str], b: frozenset[str]) -> float:
        """The similarity two texts about names `a` and `b` need to be one lesson."""
        if a == b:  # the same names, or both general (no names)
            return self.same_about
        if a and b:
            return self.threshold if a & b else self.conflict
        return self.threshold


@dataclass
class Matcher:
    """Decides whether a text (with its names) is the lesson a representative states."""

    sim: Callable[[str, str], float]
    bars: Bars
    judge: Callable[[str, str], bool] | None = None
    verdicts: dict[tuple[str, str], bool] = field(default_factory=dict)

    def matches(
        self, norm: str, about: frozenset[str], rep_norm: str, rep_about: frozenset[str]
    ) -> bool:
        if norm == rep_norm:
            return True
        score = self.sim(norm, rep_norm)
        if (
            self.judge is not None
            and about == rep_about
            and self.bars.same_about <= score < self.bars.threshold
        ):
            pair = (min(norm, rep_norm), max(norm, rep_norm))
            if pair not in self.verdicts:
                self.verdicts[pair] = bool(self.judge(*pair))
            return self.verdicts[pair]
        return score >= self.bars.bar(about, rep_about)
