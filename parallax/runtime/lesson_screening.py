"""Untrusted lessons kept out of prompts: redacted, screened, and quarantined when they fail.

See docs/internals/untrusted-input.md#lessons.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from parallax.runtime.redaction import redact
from parallax.runtime.screening import screen
from parallax.runtime.timestamps import now_iso
from parallax.state.playbook import Operation, PlaybookItem

TEXT_OPS = ("add", "update")

_Screenable = TypeVar("_Screenable", Operation, PlaybookItem)


def quarantine_entry(
    text: str,
    reasons: list[str],
    source: str,
    provenance: list[str] | None = None,
    section: str = "",
) -> dict[str, Any]:
    return {
        "id": f"q-{uuid.uuid4().hex[:12]}",
        "created_at": now_iso(),
        "source": source,
        "reason": "; ".join(reasons),
        "text": redact(text),
        "section": redact(section),
        "provenance": list(provenance or []),
    }


def screen_lessons(
    lessons: list[str], source: str, provenance: list[str]
) -> tuple[list[str], list[dict[str, Any]]]:
    """(redacted lessons that passed, quarantine entries for the rest)."""
    kept, held = [], []
    for lesson in lessons:
        verdict = screen(lesson)
        if verdict.ok:
            kept.append(redact(lesson))
        else:
            held.append(quarantine_entry(lesson, verdict.reasons, source, provenance))
    return kept, held


def _screened(thing: _Screenable, source: str) -> tuple[_Screenable | None, dict[str, Any] | None]:
    """(the thing with its texts redacted, None) if it passes; (None, its quarantine entry) if
    not."""
    verdict = screen(f"{thing.section}\n{thing.text}")
    if not verdict.ok:
        return None, quarantine_entry(
            thing.text, verdict.reasons, source, thing.provenance, thing.section
        )
    return (
        thing.model_copy(update={"text": redact(thing.text), "section": redact(thing.section)}),
        None,
    )


def _split(
    things: list[_Screenable],
    source: str,
    needs_screening: Callable[[_Screenable], bool] = lambda thing: True,
) -> tuple[list[_Screenable], list[dict[str, Any]]]:
    kept: list[_Screenable] = []
    held: list[dict[str, Any]] = []
    for thing in things:
        passed, entry = _screened(thing, source) if needs_screening(thing) else (thing, None)
        kept += [passed] if passed is not None else []
        held += [entry] if entry is not None else []
    return kept, held


def screen_operations(
    operations: list[Operation], source: str
) -> tuple[list[Operation], list[dict[str, Any]]]:
    """(operations safe to apply, in order, texts redacted; quarantine entries for adds/updates that
    failed)."""
    return _split(operations, source, lambda op: op.op in TEXT_OPS)


def screen_items(
    items: list[PlaybookItem], source: str
) -> tuple[list[PlaybookItem], list[dict[str, Any]]]:
    """(items safe to store, texts redacted; quarantine entries for the rest), for imports."""
    return _split(items, source)
