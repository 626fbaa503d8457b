"""One reflection curated into delta operations on the playbook.

Lessons become `add` operations; verdicts on shown items become tags without a model call.
"""

from __future__ import annotations

import uuid

from parallax.prompts.learn import curate_messages
from parallax.runtime.branch_call import call_branch
from parallax.state.context import Context
from parallax.state.payloads import BranchRecord, Curation, Reflection
from parallax.state.playbook import Operation, OpKind
from parallax.state.records import PromptVersion

MAX_ADDS = 3
MAX_TEXT = 400


def tag_operations(
    reflection: Reflection, shown: set[str], provenance: list[str]
) -> list[Operation]:
    """Verdicts on items the run actually saw; verdicts on any other id are ignored."""
    kinds: dict[str, OpKind] = {"helpful": "tag_helpful", "harmful": "tag_harmful"}
    return [
        Operation(op=kinds[t.tag], item_id=t.id, provenance=provenance)
        for t in reflection.item_tags
        if t.tag in kinds and t.id in shown
    ]


async def curate(
    reflection: Reflection,
    provenance: list[str],
    ctx: Context,
    template: PromptVersion | None = None,
) -> tuple[BranchRecord | None, list[Operation]]:
    """`template` is the served version of the curate prompt (None: the default)."""
    lessons = [lesson.strip() for lesson in reflection.lessons if lesson.strip()]
    if not lessons:
        return None, []
    identity = {
        "id": f"curate-{uuid.uuid4().hex[:8]}",
        "parent_id": provenance[-1] if provenance else "learn",
        "kind": "curate",
        "prompt": {"name": "curate", "version": template.get("version", 0) if template else 0},
    }
    record, curation = await call_branch(
        identity,
        curate_messages(reflection.diagnosis, lessons, template),
        Curation,
        ctx,
        model=ctx.reviewer_model,
        temperature=0.0,
    )
    if curation is None:
        return record, []
    adds = [
        Operation(
            op="add",
            section=e.section.strip()[:60] or "general",
            text=" ".join(e.text.split())[:MAX_TEXT],
            about=sorted({a.strip().lower() for a in e.about if a.strip()}),
            provenance=provenance,
        )
        for e in curation.entries
        if e.text.strip()
    ]
    return record, adds[:MAX_ADDS]
