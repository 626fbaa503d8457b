"""An edit task's agent: model steps with one worktree's tools, then one commit.

See docs/internals/plans.md#edit-agents-and-speculative-edits.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from parallax.logic.run_record import as_dicts
from parallax.prompts.plan import edit_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.sandbox import run_command
from parallax.runtime.worktrees import PathRefused, Worktree
from parallax.state.context import Context, setting
from parallax.state.plan import EditStep

MAX_STEPS = 8


@dataclass
class EditOutcome:
    status: str
    """DONE, NEEDS_REVIEW (ran out of steps) or FAILED (a call failed and nothing was committed)."""
    reason: str = ""
    commit: str | None = None
    files: list[str] = field(default_factory=list)
    summary: str = ""
    refused: list[str] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    conversation: dict[str, Any] = field(default_factory=dict)
    """What the agent was sent and what it replied: `messages`, its first step's system and user
    messages, and `steps`, each reply (`call`, an EditStep) with the tool's `result` when it used
    one. Step n was sent the messages and every earlier step (prompts/plan.py `edit_messages`); a
    failed call left no step."""


def use_tool(tree: Worktree, step: EditStep) -> str:
    """Run one step's file tool (list, read, write) in the worktree; a refused path comes back as
    text for the model."""
    try:
        if step.action == "list":
            return tree.list(step.path or ".")
        if step.action == "read":
            return tree.read(step.path)
        return tree.write(step.path, step.content)
    except PathRefused as exc:
        return f"refused: {exc}"


async def run_tests(tree: Worktree, command: str, timeout_s: float) -> str:
    """The test tool: `command` in the worktree, confined (runtime/sandbox.py); its exit, where it
    ran and its output's tail. Cancelled (another candidate passed first), everything it started is
    killed."""
    if not command.strip():
        return "no test command was given for this run"
    ran = await run_command(command, tree.root, timeout_s, readable=[tree.repo])
    if ran.exit is None:
        return ran.output  # why it could not start
    if ran.timed_out:
        return f"test command timed out after {timeout_s:g}s"
    return f"exit {ran.exit} (sandbox: {ran.sandbox})\n{ran.output}"


async def run_edit(
    tree: Worktree,
    goal: str,
    ctx: Context,
    identity: dict[str, Any],
    *,
    test_command: str = "",
    note: str = "",
    max_steps: int = MAX_STEPS,
    temperature: float | None = None,
    outcome: EditOutcome | None = None,
) -> EditOutcome:
    """Let the model work on `goal` in `tree` and commit the result on the tree's branch. `outcome`
    collects the step records as they come (a caller that may cancel the agent keeps what it did).
    """
    outcome = outcome or EditOutcome(status="DONE")
    listing = await asyncio.to_thread(tree.list, ".")
    steps: list[tuple[str, str]] = []
    turns: list[dict[str, Any]] = []
    outcome.conversation = {
        "messages": as_dicts(edit_messages(goal, tree.writes, listing, test_command, [], note)),
        "steps": turns,
    }
    for number in range(1, max_steps + 1):
        messages = edit_messages(goal, tree.writes, listing, test_command, steps, note)
        record, step = await call_branch(
            {**identity, "id": f"{identity['id']}-s{number}"},
            messages,
            EditStep,
            ctx,
            model=setting(ctx.model),
            temperature=setting(ctx.temperature) if temperature is None else temperature,
        )
        outcome.records.append(record.model_dump())
        if step is None:
            outcome.status, outcome.reason = "FAILED", f"edit step {number} failed: {record.error}"
            break
        turns.append({"call": step.model_dump()})
        if step.action == "done":
            outcome.summary = step.note
            break
        observation = (
            await run_tests(tree, test_command, setting(ctx.tool_timeout_s))
            if step.action == "test"
            else await asyncio.to_thread(use_tool, tree, step)
        )
        if observation.startswith("refused:"):
            outcome.refused.append(observation)
        turns[-1]["result"] = observation
        steps.append((json.dumps(step.model_dump(), ensure_ascii=False), observation))
    else:
        outcome.status, outcome.reason = (
            "NEEDS_REVIEW",
            f"the agent did not say done within {max_steps} steps",
        )
    outcome.commit = await asyncio.to_thread(tree.commit, f"{identity['id']}: {goal}"[:200])
    outcome.files = await asyncio.to_thread(tree.changed_files)
    if outcome.status == "FAILED" and outcome.commit is not None:
        outcome.status = "NEEDS_REVIEW"  # it wrote something before the failure: keep it, flagged
    if outcome.status == "DONE" and outcome.commit is None:
        outcome.reason = "the agent changed nothing"
    return outcome
