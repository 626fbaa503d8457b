"""The fact layer: a finding counts only if its quote occurs in the slice it came from.

A string search, not a model: it cannot be talked round. See docs/internals/runs.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from parallax.runtime import linear_regex

MIN_QUOTE_CHARS = 8
"""Fewest characters (after normalising) of a quote that can support a finding."""

_FOLD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u00a0": " ",
    }
)
_ELLIPSIS = linear_regex.compile(r"\s*(?:\.\.\.|\x{2026})\s*")
"""Where a quote leaves words out; RE2 (linear time): on `re`, a long run of spaces made the split
quadratic."""


def normalise(text: str) -> str:
    return " ".join(text.translate(_FOLD).lower().split())


def quote_occurs(quote: str, source: str) -> bool:
    """Whether `quote` (parts split at an ellipsis, in order) occurs in `source`, forgiving case and
    spacing."""
    parts = [normalise(p).strip(" \"'") for p in _ELLIPSIS.split(quote or "")]
    parts = [p for p in parts if p]
    if sum(len(p) for p in parts) < MIN_QUOTE_CHARS:
        return False
    haystack, start = normalise(source), 0
    for part in parts:
        found = haystack.find(part, start)
        if found < 0:
            return False
        start = found + len(part)
    return True


@dataclass
class FactCheck:
    """Findings of a section run, split by whether their quotes verify."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def checked(self) -> int:
        return len(self.kept) + len(self.dropped)

    def report(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "verified": len(self.kept),
            "dropped": len(self.dropped),
            "share_verified": round(len(self.kept) / self.checked, 3) if self.checked else None,
            "findings": self.kept,
            "dropped_findings": self.dropped[:20],
        }


def check_findings(findings: list[tuple[int, str, str]], slices: list[str]) -> FactCheck:
    """Each (slice index, point, quote) against its own slice; order kept."""
    result = FactCheck()
    for index, point, quote in findings:
        source = slices[index] if 0 <= index < len(slices) else ""
        entry = {"slice_index": index, "point": point.strip(), "quote": quote.strip()}
        (result.kept if quote_occurs(quote, source) else result.dropped).append(entry)
    return result


_LETTER = r"[^\W\d_]"
_FIGURE = re.compile(
    rf"(?<!\w)(?<!\d[.,])(?<!{_LETTER}-)"  # nothing word-like glued on the left
    r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    rf"(?!\w)(?![.,]\d)(?!-{_LETTER})"
)  # nor on the right
"""A figure is a number of its own, a token: digits, with thousands commas and a decimal point, that
touch no letter, digit or underscore on either side, directly or through a hyphen. So `$3`, `(3)`,
`-3`, `3.5%`, `3,000`, `3 million` and `3.` at a sentence end print 3 (or 3.5, 3000); the 3 of `3M`,
`Q3`, `FY3`, `3rd`, `3-D`, `10-K` or `COVID-3`, the 2 of `H2O`, and `3m` (`3m units`: a glued scale
letter cannot be told from a name such as "3M Company" in PDF text) do not. Precision over recall: a
value whose quote writes it glued to letters is dropped (and counted), never verified by a digit
inside a name."""
SCALES = (1, 1_000, 1_000_000, 1_000_000_000, 0.01)
"""A figure may be printed in thousands, millions or billions ("in millions"), or as a percentage.
"""


def number_shown(value: float, quote: str) -> bool:
    """Whether `quote` prints the number `value` as a figure of its own (`_FIGURE`), up to sign,
    rounding to the printed digits, and a scale of thousands, millions, billions or per cent. A
    quote that occurs in the source but shows another number does not support the value: a misread
    figure with a true quote is caught here, and so is a digit inside a name ("3M Company and
    Subsidiaries" does not print 3)."""
    target = abs(value)
    for match in _FIGURE.finditer(quote or ""):
        printed = float(match.group().replace(",", ""))
        decimals = len(match.group().partition(".")[2])
        for scale in SCALES:
            if abs(printed * scale - target) <= max(0.5 * 10**-decimals * scale, 1e-9 * target):
                return True
    return False
