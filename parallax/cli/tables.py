"""Tables that read at any width, 80 columns included: ids never wrap, text never ends mid-word.

See docs/internals/cli.md#tables.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

SHORT_ID = 8
"""Hex digits of a long id that a table shows (4 billion values: unique among any tenant's runs in
practice)."""


def new_table(title: str | None, columns: tuple[str, ...], text: tuple[str, ...] = ()) -> Table:
    """A table whose `text` columns wrap at word boundaries and whose other columns never wrap."""
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
        title_justify="left",
    )
    for column in columns:
        if column in text:
            table.add_column(column, overflow="ellipsis", ratio=1)
        else:
            table.add_column(column, no_wrap=True, overflow="ellipsis")
    return table


def print_table(console: Console, table: Table, empty: str) -> None:
    """`table`, or when it has no rows one line instead: its title and `empty`, what to do next.

    A header over no rows would say neither that nothing is there nor how that changes."""
    if table.row_count:
        console.print(table)
    else:
        console.print(
            f"{table.title or 'nothing'}: {empty}", highlight=False, markup=False, soft_wrap=True
        )


def short_id(value: str | None) -> str:
    """A 32-hex-digit id (trace, thread) as its first SHORT_ID digits; any other id as it is."""
    if value and len(value) == 32 and all(c in "0123456789abcdef" for c in value):
        return value[:SHORT_ID]
    return value or "-"


def elide(text: str | None, limit: int) -> str:
    """`text` on one line, at most `limit` characters, cut at a word boundary with `…` when it is
    longer."""
    flat = " ".join((text or "").split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    if " " in cut and flat[limit - 1] != " ":
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + "…"


def when(iso: str | None) -> str:
    """An ISO time as a table shows it: date and minutes ("2026-12-02 02:41")."""
    return (iso or "")[:16].replace("T", " ") or "-"


def gate_summary(gate: dict[str, Any] | None) -> str:
    """What a version's gate decided, in a few words (the whole record is in --json)."""
    gate = gate or {}
    if isinstance(gate.get("val_accuracy_before"), (int, float)) and isinstance(
        gate.get("val_accuracy_after"), (int, float)
    ):
        return f"val {gate['val_accuracy_before']:.2f} → {gate['val_accuracy_after']:.2f}"
    if isinstance(gate.get("val_accuracy"), (int, float)):
        return f"val {gate['val_accuracy']:.2f}"
    if "rollback_to" in gate:
        return f"rollback to v{gate['rollback_to']}"
    if gate.get("imported"):
        return "imported" + (
            f", {gate['quarantined']} quarantined" if gate.get("quarantined") else ""
        )
    scalars = [
        f"{k} {v}" for k, v in gate.items() if isinstance(v, (str, int, float, bool)) and v != ""
    ]
    return elide(", ".join(scalars), 40) or "-"
