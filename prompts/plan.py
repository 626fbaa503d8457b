"""Prompts of the plan graph: planner (and replanner), combine, edit agent, contradiction check.

Each builder takes only what its call may see: the planner sees the request and the document's
size, never the document; a combine call sees two results; a contradiction check two findings.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from parallax.prompts.solve import JSON_RULE

PLAN_FORMAT = (
    'Reply with a JSON object {"tasks": [...], "synthesis": "concat"}. Each task is {"id": 1,'
    ' "goal": "...", "kind": "solve", "deps": [], "inputs": {}}. ids are 1, 2, 3 in order. kind is'
    " solve (answer a question or write something), vote (a short answer that several independent"
    " tries should agree on), section (read the long document in parts; only when there is a"
    ' document), tool (inputs.tool = "calc" with inputs.expression such as "${1}+${2}"), or edit'
    ' (change files; list them in "writes"). Write $N or ${N} in a goal or input where task N\'s'
    " result belongs, and list N in deps. Tasks without deps run at the same time. synthesis is"
    " concat (results one after another), reduce (combine them), vote (the tasks answer the same"
    ' question), or assembly (set "template" with ${N} where task N\'s result goes).'
)


def planner_messages(
    request: str,
    document_chars: int,
    max_tasks: int,
    repo: bool,
    previous: dict[str, Any] | None = None,
    outcome: list[dict[str, Any]] | None = None,
) -> list[BaseMessage]:
    """For the planner, or the replanner when `previous` (the last plan) and `outcome` (what its
    tasks did) are given."""
    context = [
        (
            f"The request comes with a document of {document_chars} characters."
            if document_chars
            else "There is no document beyond the request."
        ),
        (
            "Edit tasks may change files in the repository."
            if repo
            else "There is no repository: no edit tasks."
        ),
        f"Use at most {max_tasks} tasks.",
    ]
    ask = f"Request:\n{request}"
    if previous is not None:
        lines = "\n".join(
            f"- task {t['id']} ({t['status']}): {(t.get('output') or t.get('reason') or '')[:200]}"
            for t in outcome or []
        )
        ask += (
            f"\n\nThe last plan was:\n{json.dumps(previous, ensure_ascii=False)}\nWhat"
            f" happened:\n{lines}\nMake a new plan that gets the missing results another way. Do"
            " not repeat the same plan."
        )
    return [
        SystemMessage(
            f"You plan work as a small graph of tasks. {PLAN_FORMAT} {' '.join(context)}"
            f" {JSON_RULE}"
        ),
        HumanMessage(ask),
    ]


def combine_messages(request: str, first: str, second: str) -> list[BaseMessage]:
    """For one step of a `reduce` synthesis: two results become one."""
    return [
        SystemMessage(
            "Combine two partial results into one that keeps every fact of both. Reply with a JSON "
            'object with two keys: "reasoning" (one sentence) and "answer" (the combined result). '
            f"{JSON_RULE}"
        ),
        HumanMessage(f"Request: {request}\n\nFirst result:\n{first}\n\nSecond result:\n{second}"),
    ]


def edit_messages(
    goal: str,
    writes: list[str],
    files: str,
    test_command: str,
    steps: list[tuple[str, str]],
    note: str = "",
) -> list[BaseMessage]:
    """For one step of an edit task: its goal, its files, and the conversation of its own tool calls
    so far."""
    system = (
        "You change files in a repository through tools. Each reply is one JSON object"
        ' {"action": ..., "path": ..., "content": ..., "note": ...}: action "list"'
        ' (files under path), "read" (a file), "write" (replace a whole file with content),'
        ' "test" (run the tests), or "done" (note says what changed). You may only write:'
        f" {', '.join(writes)}. {JSON_RULE}"
    )
    ask = f"Goal: {goal}\n\nFiles:\n{files}" + (
        f"\n\nTest command: {test_command}" if test_command else ""
    )
    if note:
        ask += f"\n\n{note}"
    messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(ask)]
    for reply, observation in steps:
        messages += [AIMessage(reply), HumanMessage(f"Result:\n{observation}")]
    return messages


def contradiction_messages(first: str, second: str) -> list[BaseMessage]:
    """For the semantic check of two findings that look alike."""
    return [
        SystemMessage(
            "Two findings were taken from different parts of one document. Reply with a JSON"
            ' object with two keys: "reason" (one sentence) and "contradicts" (true only if both'
            f" cannot be true at the same time). {JSON_RULE}"
        ),
        HumanMessage(f"Finding A: {first}\nFinding B: {second}"),
    ]
