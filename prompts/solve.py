"""Prompts of the solve graph, one builder per branch kind.

Builders take only what a branch may see: a slice branch gets its slice and the shared
brief, never the whole document. Playbook items are quoted with their ids so a trace
can say which lessons a branch was shown.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

JSON_RULE = "Reply with one JSON object only, no other text."


def _lessons(items: list[dict]) -> str:
    if not items:
        return ""
    lines = "\n".join(f"- [{item['id']}] {item['text']}" for item in items)
    return f"\n\nLessons from earlier runs (use them when they apply):\n{lines}"


SHORT_ANSWER = "only the final answer: a number, a word, yes/no or a short phrase"
FULL_ANSWER = "the complete answer to the task"


def answer_messages(task: str, question: str, items: list[dict], *, short: bool) -> list[BaseMessage]:
    """For `vote` branches (short answers that can agree) and `direct` ones (full answers)."""
    ask = f"{task}\n\nQuestion: {question}" if question else task
    return [
        SystemMessage(
            "You solve tasks carefully. Reply with a JSON object with two keys: \"reasoning\" "
            f"(one or two sentences of working) and \"answer\" ({SHORT_ANSWER if short else FULL_ANSWER}). "
            f"{JSON_RULE}"
            + _lessons(items)
        ),
        HumanMessage(ask),
    ]


def slice_messages(brief: str, question: str, part: str, index: int, total: int, items: list[dict]) -> list[BaseMessage]:
    """For `slice` branches: one part of a document, read on its own."""
    return [
        SystemMessage(
            f"You read part {index + 1} of {total} of a longer document. Report only what "
            "this part says that helps answer the question; set `relevant` to false if "
            "nothing does. Reply with a JSON object with two keys: \"relevant\" (true or false) "
            "and \"points\" (a list of findings from this part; each is an object with \"quote\", "
            "a few words copied exactly from the part, and \"point\", the finding in one short "
            f"sentence). A point whose quote is not in the part is discarded. {JSON_RULE}"
            + _lessons(items)
        ),
        HumanMessage(f"Brief: {brief}\nQuestion: {question}\n\nPart {index + 1}:\n{part}"),
    ]


def judge_messages(task: str, question: str, candidates: list[str]) -> list[BaseMessage]:
    """For the arbitration call when votes do not reach the threshold."""
    listed = "\n".join(f"- {c}" for c in candidates)
    ask = f"{task}\n\nQuestion: {question}" if question else task
    return [
        SystemMessage(
            "Independent solvers disagreed. Reply with a JSON object with two keys: \"choice\" "
            "(the one candidate answer that is correct, copied exactly from the list) and "
            f"\"reason\" (one sentence). {JSON_RULE}"
        ),
        HumanMessage(f"{ask}\n\nCandidate answers:\n{listed}"),
    ]


def red_team_messages(task: str, question: str, answer: str) -> list[BaseMessage]:
    """For the red-team branch, which argues against the leading answer."""
    ask = f"{task}\n\nQuestion: {question}" if question else task
    return [
        SystemMessage(
            "You are a critic. Reply with a JSON object with two keys: \"objection\" (the strongest "
            "reason the proposed answer could be wrong) and \"severity\" (low, medium or high). "
            f"{JSON_RULE}"
        ),
        HumanMessage(f"{ask}\n\nProposed answer: {answer}"),
    ]
