"""Prompts of the solve graph, one builder per branch kind.

Builders take only what a branch may see (a slice branch: its slice and the shared brief, never the
whole document); playbook items are quoted with their ids, so a trace can say which lessons a
branch was shown.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage

from parallax.prompts.templates import JSON_RULE, render
from parallax.state.records import PlaybookItemData, PromptVersion

__all__ = [
    "JSON_RULE",
    "answer_messages",
    "slice_messages",
    "typed_messages",
    "typed_slice_messages",
    "judge_messages",
    "red_team_messages",
    "candidate_messages",
    "compare_messages",
    "RUBRIC",
]


def _lessons(items: list[PlaybookItemData]) -> str:
    if not items:
        return ""
    lines = "\n".join(f"- [{item['id']}] {item['text']}" for item in items)
    return f"\n\nLessons from earlier runs (use them when they apply):\n{lines}"


def _ask(task: str, question: str) -> str:
    return f"{task}\n\nQuestion: {question}" if question else task


SHORT_ANSWER = "only the final answer: a number, a word, yes/no or a short phrase"
FULL_ANSWER = "the complete answer to the task"


def answer_messages(
    task: str,
    question: str,
    items: list[PlaybookItemData],
    *,
    short: bool,
    version: PromptVersion | None = None,
) -> list[BaseMessage]:
    """For `vote` branches (short answers that can agree) and `direct` ones (full answers)."""
    return render(
        "answer",
        version,
        answer_spec=SHORT_ANSWER if short else FULL_ANSWER,
        lessons=_lessons(items),
        ask=_ask(task, question),
    )


def slice_messages(
    brief: str,
    question: str,
    part: str,
    index: int,
    total: int,
    items: list[PlaybookItemData],
    version: PromptVersion | None = None,
) -> list[BaseMessage]:
    """For `slice` branches: one part of a document, read on its own."""
    return render(
        "slice",
        version,
        number=index + 1,
        total=total,
        lessons=_lessons(items),
        brief=brief,
        question=question,
        part=part,
    )


def typed_messages(
    task: str,
    question: str,
    items: list[PlaybookItemData],
    schema: str,
    version: PromptVersion | None = None,
) -> list[BaseMessage]:
    """For `direct` and `vote` branches asked for the user's object (`schema`: its JSON Schema as
    text)."""
    return render(
        "typed", version, lessons=_lessons(items), ask=_ask(task, question), schema=schema
    )


def typed_slice_messages(
    brief: str,
    question: str,
    part: str,
    index: int,
    total: int,
    items: list[PlaybookItemData],
    schema: str,
    version: PromptVersion | None = None,
) -> list[BaseMessage]:
    """For `slice` branches asked for the part of the user's object their slice supports, with
    quotes."""
    return render(
        "typed_slice",
        version,
        number=index + 1,
        total=total,
        lessons=_lessons(items),
        brief=brief,
        question=question,
        part=part,
        schema=schema,
    )


def judge_messages(
    task: str, question: str, candidates: list[str], version: PromptVersion | None = None
) -> list[BaseMessage]:
    """For the arbitration call when votes do not reach the threshold."""
    return render(
        "judge",
        version,
        ask=_ask(task, question),
        candidates="\n".join(f"- {c}" for c in candidates),
    )


def red_team_messages(
    task: str, question: str, answer: str, version: PromptVersion | None = None
) -> list[BaseMessage]:
    """For the red-team branch, which argues against the leading answer."""
    return render("red_team", version, ask=_ask(task, question), answer=answer)


RUBRIC = (
    "it does what the task asks, completely and correctly; it makes no claim or step that is wrong;"
    " it is clear and no longer than it needs to be."
)


def candidate_messages(
    task: str,
    question: str,
    items: list[PlaybookItemData],
    approach: str,
    check_note: str = "",
    version: PromptVersion | None = None,
) -> list[BaseMessage]:
    """For a speculative `candidate` branch: the task with its own approach (and how its answer will
    be checked)."""
    return render(
        "candidate",
        version,
        approach=approach,
        check_note=check_note,
        lessons=_lessons(items),
        ask=_ask(task, question),
    )


def compare_messages(
    task: str, question: str, first: str, second: str, version: PromptVersion | None = None
) -> list[BaseMessage]:
    """For one `compare` call of the tournament: `first` is shown as A, `second` as B."""
    return render(
        "compare", version, rubric=RUBRIC, ask=_ask(task, question), first=first, second=second
    )
