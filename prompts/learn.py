"""Prompts of the learn graph: one reflection per run, one curation per reflection.

Neither sees more than one run, so no call squeezes many reflections into a few generic lines.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage

from parallax.prompts.templates import render
from parallax.state.records import PlaybookItemData, PromptVersion


def reflect_messages(
    task: str,
    answer: str,
    feedback: str,
    correct: bool,
    items: list[PlaybookItemData],
    version: PromptVersion | None = None,
) -> list[BaseMessage]:
    used = "\n".join(f"- [{i['id']}] {i['text']}" for i in items) or "(none)"
    return render(
        "reflect",
        version,
        task=task,
        answer=answer,
        result="correct" if correct else "wrong",
        feedback=feedback,
        used=used,
    )


def curate_messages(
    diagnosis: str, lessons: list[str], version: PromptVersion | None = None
) -> list[BaseMessage]:
    return render(
        "curate",
        version,
        diagnosis=diagnosis,
        lessons="\n".join(f"- {lesson}" for lesson in lessons),
    )
