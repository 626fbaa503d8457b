"""A speculative edit task: K candidate patches at once, the first whose tests pass wins.

See docs/plan.md (speculative edit tasks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parallax.logic.branch_kinds import spread
from parallax.logic.candidate_watch import CandidateWatch
from parallax.logic.edit_agent import EditOutcome, run_edit
from parallax.logic.speculation import (
    APPROACHES,
    TEMPERATURE_HIGH,
    TEMPERATURE_LOW,
    failed_tests,
    passed_tests,
)
from parallax.runtime.check_folders import run_check
from parallax.runtime.worktrees import Worktree, git, repo_lock
from parallax.state.context import Context


@dataclass
class SpeculativeEdit:
    outcome: EditOutcome
    """The winner's outcome (status, commit, files), with every candidate's step records."""
    branch: str | None
    """The winner's branch (None: no candidate committed anything)."""
    candidates: list[dict[str, Any]] = field(default_factory=list)
    """Per candidate: id, approach, temperature, branch, commit, check, result, why it lost and
    where its conversation is kept."""


Keep = Callable[[str, dict[str, Any]], Awaitable[str | None]]
"""Keeps a candidate's conversation (candidate id, conversation) and gives its key (None: nowhere to
keep it)."""


async def _made(work: asyncio.Future[Worktree]) -> Worktree:
    """The worktree, made to its end even if the candidate is cancelled meanwhile (then removed, and
    re-raised)."""
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        tree = await work
        await asyncio.to_thread(tree.remove)
        raise


async def run_speculative_edit(
    repo: Path,
    base: str,
    branch_of: Callable[[int], str],
    where_of: Callable[[int], Path],
    writes: list[str],
    goal: str,
    ctx: Context,
    identity: dict[str, Any],
    *,
    test_command: str,
    candidates: int,
    timeout_s: float,
    keep: Keep | None = None,
) -> SpeculativeEdit:
    watch = CandidateWatch()
    temperatures = spread(TEMPERATURE_LOW, TEMPERATURE_HIGH, candidates)
    records: list[dict[str, Any]] = []

    async def one(i: int) -> dict[str, Any]:
        name, hint = APPROACHES[i % len(APPROACHES)]
        cid = f"{identity['id']}-c{i + 1}"
        summary: dict[str, Any] = {
            "id": cid,
            "approach": name,
            "hint": hint,
            "temperature": temperatures[i],
            "branch": branch_of(i),
            "commit": None,
            "check": None,
            "result": "",
            "why": "",
        }
        current = asyncio.current_task()
        if current is not None:
            watch.started(cid, current)
        outcome = EditOutcome(status="DONE")
        summary["outcome"] = outcome
        tree: Worktree | None = None
        try:
            tree = await _made(
                asyncio.ensure_future(
                    asyncio.to_thread(
                        Worktree.create, repo, branch_of(i), base, where_of(i), writes
                    )
                )
            )
            await run_edit(
                tree,
                goal,
                ctx,
                {**identity, "id": cid},
                test_command=test_command,
                note=f"Approach: {hint}",
                temperature=temperatures[i],
                outcome=outcome,
            )
            summary.update(
                commit=outcome.commit,
                files=outcome.files,
                refused=outcome.refused,
                status=outcome.status,
            )
            if outcome.commit is None:
                watch.finished(cid, False)
                summary.update(result="lost", why=outcome.reason or "changed nothing")
                return summary
            check = await run_check(test_command, tree.root, tree.root, timeout_s, readable=[repo])
            check["passed_tests"] = passed_tests(check["output"])
            check["failed_tests"] = failed_tests(check["output"])
            won = watch.finished(cid, check["passed"])
            summary.update(
                check={k: v for k, v in check.items() if k != "output"}
                | {"output": check["output"][-800:]},
                result="won" if won else "passed" if check["passed"] else "failed",
            )
            return summary
        except asyncio.CancelledError:
            if cid not in watch.cancelled:
                raise
            summary.update(result="cancelled", why=watch.reason, outcome=None)
            return summary
        finally:
            records.extend(outcome.records)
            if tree is not None:
                await asyncio.shield(asyncio.to_thread(tree.remove))
            if keep is not None and outcome.conversation:
                summary["conversation"] = await asyncio.shield(keep(cid, outcome.conversation))

    done = await asyncio.gather(*(asyncio.ensure_future(one(i)) for i in range(candidates)))
    winner = _pick(done, watch.winner)
    for c in done:
        if c is not winner:
            await asyncio.to_thread(_delete_branch, repo, c["branch"])
            if c["result"] != "cancelled":
                c.update(
                    result="lost",
                    why=c["why"]
                    or (
                        f"its tests passed after {watch.winner}'s"
                        if c["check"] and c["check"]["passed"]
                        else _failed(c, winner)
                    ),
                )
    if winner is None:
        return SpeculativeEdit(
            EditOutcome(status="FAILED", reason="no candidate changed anything", records=records),
            None,
            [{k: v for k, v in c.items() if k != "outcome"} for c in done],
        )
    outcome = winner["outcome"]
    outcome.records = records
    winner["result"] = "won"
    if watch.winner is None:
        tests = (winner["check"] or {}).get("passed_tests", 0)
        outcome.status = "NEEDS_REVIEW"
        outcome.reason = (
            f"no candidate passed the tests; {winner['id']} has the most passing tests ({tests})"
        )
    summaries = [{k: v for k, v in c.items() if k != "outcome"} for c in done]
    return SpeculativeEdit(outcome, winner["branch"], summaries)


def _pick(done: list[dict[str, Any]], passed_first: str | None) -> dict[str, Any] | None:
    if passed_first is not None:
        return next(c for c in done if c["id"] == passed_first)
    committed = [c for c in done if c["commit"] is not None and c["check"] is not None]
    if not committed:
        return None
    return max(committed, key=lambda c: (c["check"]["passed_tests"], -c["check"]["finished_at"]))


def _failed(candidate: dict[str, Any], winner: dict[str, Any] | None) -> str:
    check = candidate.get("check") or {}
    if not check:
        return candidate.get("why") or "not checked"
    shown = (
        "timed out"
        if check.get("timed_out")
        else f"exit {check.get('exit')}, {check.get('passed_tests', 0)} passed"
    )
    return f"its tests failed ({shown})" + (f"; {winner['id']} won" if winner else "")


def _delete_branch(repo: Path, branch: str) -> None:
    with repo_lock(repo):
        git(repo, "branch", "-D", branch, check=False)
