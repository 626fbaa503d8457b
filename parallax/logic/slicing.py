"""A long input split into independent slices by its own structure.

Headings first (Markdown `#` or `Topic:` lines), then blank-line paragraphs, then lines; small
pieces are packed up to the budget and a big one is cut at line or sentence boundaries.
"""

from __future__ import annotations

import re

HEADING = re.compile(r"^(#{1,6} .+|Topic: .+)$", re.MULTILINE)


def _sections(text: str) -> list[str]:
    starts = [m.start() for m in HEADING.finditer(text)]
    if not starts:
        return [text]
    if starts[0] > 0:
        starts.insert(0, 0)
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)], strict=True)]


def _cut(piece: str, budget: int) -> list[str]:
    """Cut one oversized piece at paragraph, line, sentence, then hard boundaries."""
    if len(piece) <= budget:
        return [piece]
    for separator in ("\n\n", "\n", ". ", " "):
        parts = piece.split(separator)
        # Drop empty pieces so each piece is strictly shorter than `piece`: the recursion ends.
        pieces = [p for p in [q + separator for q in parts[:-1]] + [parts[-1]] if p]
        if len(pieces) > 1:
            return _pack(pieces, budget)
    return [piece[i : i + budget] for i in range(0, len(piece), budget)]


def _pack(pieces: list[str], budget: int) -> list[str]:
    slices: list[str] = []
    current = ""
    for piece in pieces:
        for part in _cut(piece, budget):
            if current and len(current) + len(part) > budget:
                slices.append(current)
                current = ""
            current += part
    if current:
        slices.append(current)
    return slices


def split_into_slices(text: str, budget: int) -> list[str]:
    """Slices in input order; each at most `budget` characters, none empty."""
    if budget < 1:
        raise ValueError("slice budget must be positive")
    sections = _sections(text)
    if len(sections) == 1:
        sections = text.split("\n\n")
        sections = [s + "\n\n" for s in sections[:-1]] + [sections[-1]]
    return [s.strip() for s in _pack(sections, budget) if s.strip()]


def split_pages(pages: list[str], budget: int) -> tuple[list[str], list[list[int]]]:
    """Slices of a paged document and, per slice, the pages (from 1) its text comes from. A page
    larger than the budget is cut like any text; short pages (or the last piece of a cut one) are
    packed with the next page up to the budget. A quote is later placed on the one of its slice's
    pages it occurs in.
    """
    slices: list[str] = []
    owners: list[list[int]] = []
    for number, page in enumerate(pages, start=1):
        for part in split_into_slices(page, budget) if page.strip() else []:
            if slices and owners[-1][-1] != number and len(slices[-1]) + 2 + len(part) <= budget:
                slices[-1] += "\n\n" + part
                owners[-1].append(number)
            else:
                slices.append(part)
                owners.append([number])
    return slices, owners
