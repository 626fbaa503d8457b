"""Reflect on one run: what went right or wrong, concrete lessons, verdicts on used items.

One model call per run, never a call over many runs (see DESIGN.md, context overload).
"""

from __future__ import annotations

import uuid
from typing import Any

from parallax.prompts.learn import reflect_messages
from parallax.runtime.branch_call import call_branch
from parallax.state.context import Context
from parallax.state.payloads import BranchRecord, Reflection
from parallax.state.records import PlaybookItemData, PromptVersion, TaskData


async def reflect(
    run: dict[str, Any],
    task: TaskData,
    items: list[PlaybookItemData],
    ctx: Context,
    template: PromptVersion | None = None,
) -> tuple[BranchRecord, Reflection | None]:
    """`template` is the served version of the reflect prompt (None: the default)."""
    identity = {
        "id": f"reflect-{uuid.uuid4().hex[:8]}",
        "parent_id": run.get("trace_id") or "learn",
        "kind": "reflect",
        "playbook_item_ids": [i["id"] for i in items],
        "prompt": {"name": "reflect", "version": template.get("version", 0) if template else 0},
    }
    messages = reflect_messages(
        task["input"], run.get("answer", ""), run["feedback"], run["correct"], items, template
    )
    return await call_branch(
        identity, messages, Reflection, ctx, model=ctx.reviewer_model, temperature=0.3
    )
