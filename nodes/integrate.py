"""Plan mode: the edit tasks' branches merged into one integration branch, each checked first.

See docs/plan.md (integrate).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.edit_agent import run_edit
from parallax.runtime.run_context import context_of, refuse_when_served
from parallax.runtime.worktrees import Integration, MergeCheck, Worktree, work_folder
from parallax.state.context import Context
from parallax.state.plan import FINISHED, Plan, PlanState

RETRY_NOTE = (
    "Your earlier change to {files} conflicted with changes other tasks made to the same files;"
    " those changes are now in the files. Read the files and make your change again, keeping"
    " theirs."
)


async def _retry(
    state: PlanState,
    integration: Integration,
    record: dict[str, Any],
    conflict: list[str],
    ctx: Context,
) -> dict[str, Any]:
    """Run an edit task once more on the integration branch's head; merge it if that is clean and
    keeps every line."""
    edit = record["edit"]
    branch = f"{edit['branch']}-retry"
    where = work_folder("worktrees", state["trace_id"], f"task-{record['id']}-retry")
    head = await asyncio.to_thread(lambda: integration.head)
    tree = await asyncio.to_thread(
        Worktree.create, integration.repo, branch, head, where, edit["writes"]
    )
    try:
        identity = {
            "id": f"edit-{state['trace_id'][:8]}-{record['id']}-retry",
            "parent_id": state["trace_id"],
            "kind": "edit",
        }
        outcome = await run_edit(
            tree,
            record["goal"],
            ctx,
            identity,
            test_command=state.get("test_command", ""),
            note=RETRY_NOTE.format(files=", ".join(conflict)),
        )
    finally:
        await asyncio.to_thread(tree.remove)
    retry = {
        "branch": branch,
        "base": head,
        "commit": outcome.commit,
        "status": outcome.status,
        "records": outcome.records,
    }
    if outcome.commit is None:
        return {**retry, "merged": False, "why": outcome.reason or "the retry changed nothing"}
    dropped = await asyncio.to_thread(integration.dropped_lines, branch, state["repo_base"])
    if dropped:
        return {
            **retry,
            "merged": False,
            "why": f"the retry would undo {len(dropped)} merged line(s)",
            "dropped": dropped[:10],
        }
    found = await asyncio.to_thread(
        integration.merge, branch, f"merge task {record['id']} (retried): {record['goal']}"[:200]
    )
    return {
        **retry,
        "merged": found.clean,
        "why": "" if found.clean else f"conflict again in {', '.join(found.conflicts)}",
    }


async def integrate(state: PlanState, runtime: Runtime[Context]) -> dict[str, Any]:
    refuse_when_served("merging edit branches in a repository")
    ctx = context_of(runtime)
    plan = Plan.model_validate(state["plan"])
    records = {r["id"]: r for r in state.get("tasks", []) if r["round"] == state["round"]}
    edits = [
        records[t.id]
        for t in plan.tasks
        if t.kind == "edit"
        and records.get(t.id, {}).get("status") in FINISHED
        and (records[t.id].get("edit") or {}).get("commit")
    ]
    if not edits:
        return {}
    repo = Path(state["repo"])
    integration = await asyncio.to_thread(
        Integration, repo, f"parallax/{state['trace_id'][:8]}/integration", state["repo_base"]
    )
    clean: list[tuple[dict[str, Any], MergeCheck]] = []
    pending: list[tuple[dict[str, Any], MergeCheck]] = []
    conflicts: list[dict[str, Any]] = []
    branches: list[dict[str, Any]] = []
    for record in edits:
        found = await asyncio.to_thread(
            integration.merge,
            record["edit"]["branch"],
            f"merge task {record['id']}: {record['goal']}"[:200],
        )
        (clean if found.clean else pending).append((record, found))
    merged = [r["id"] for r, _ in clean]
    for record, found in pending:
        retry = await _retry(state, integration, record, found.conflicts, ctx)
        branches += retry.pop("records")
        if retry["merged"]:
            merged.append(record["id"])
            continue
        diff = await asyncio.to_thread(
            integration.diff, record["edit"]["branch"], state["repo_base"]
        )
        conflicts.append(
            {
                "task": record["id"],
                "branch": record["edit"]["branch"],
                "files": found.conflicts,
                "messages": found.messages[:2000],
                "diff": diff,
                "retry": retry,
            }
        )
    report = {
        "integration_branch": integration.branch,
        "base": state["repo_base"],
        "head": await asyncio.to_thread(lambda: integration.head),
        "merged": merged,
        "conflicts": conflicts,
    }
    update: dict[str, Any] = {
        "verification": {**(state.get("verification") or {}), "merge": report},
        "branches": branches,
    }
    if conflicts:
        why = "; ".join(
            f"task {c['task']} conflicts in {', '.join(c['files'])} ({c['retry']['why']})"
            for c in conflicts
        )
        update.update(
            status="needs_review" if state.get("status") != "failed" else "failed",
            reason="; ".join(x for x in (state.get("reason", ""), why) if x)[:1500],
        )
    return update
