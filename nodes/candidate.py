"""One speculative candidate: made with its own approach, then checked in its own folder.

See docs/how-it-works.md#speculate-several-approaches-at-once.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from langgraph.errors import NodeError
from langgraph.runtime import Runtime

from parallax.logic.budget import BUDGET_CAUSE, tally_of
from parallax.logic.candidate_watch import CandidateWatch
from parallax.logic.speculation import check_note, failed_tests, passed_tests
from parallax.prompts.solve import candidate_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.check_folders import CheckFolder, run_check
from parallax.runtime.fan_out_limit import fan_out_limit
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of, refuse_when_served, tenant_of
from parallax.runtime.services import services_of
from parallax.runtime.storage.candidate_results import CandidateResults
from parallax.runtime.worktrees import GitError, PathRefused
from parallax.state.context import Context, setting
from parallax.state.lifecycle import Lifecycle
from parallax.state.payloads import BranchRecord, CandidateAnswer
from parallax.state.records import (
    BranchRecordData,
    CandidateSpec,
    CandidateTask,
    Speculation,
    branch_data,
)


def _approach(spec: CandidateSpec) -> dict[str, Any]:
    return {
        "approach": spec["approach"],
        "hint": spec["hint"],
        "temperature": spec["temperature"],
        "model": spec["model"] or None,
        "index": spec["index"],
        "check": None,
        "result": "",
        "why": "",
    }


def _made(record: BranchRecordData) -> Speculation:
    """A made candidate's speculation record (`_generate` gives every one its approach)."""
    return cast(Speculation, record["speculation"])


async def _generate(task: CandidateTask, ctx: Context, life: Lifecycle) -> BranchRecordData:
    spec = task["candidate"]
    template = (task.get("prompts") or {}).get("candidate")
    identity = {
        "id": spec["id"],
        "parent_id": spec["parent_id"],
        "kind": "candidate",
        "playbook_item_ids": [item["id"] for item in spec["playbook"]],
        "prompt": {"name": "candidate", "version": template.get("version", 0) if template else 0},
    }
    messages = candidate_messages(
        spec["text"],
        spec["question"],
        spec["playbook"],
        spec["hint"],
        check_note(task["check"]["command"], task["check"]["file"]),
        version=template,
    )
    record, _ = await call_branch(
        identity,
        messages,
        CandidateAnswer,
        ctx,
        model=spec["model"],
        temperature=spec["temperature"],
        lifecycle=life,
        run_metadata=dict(task["meta"]),
    )
    record.speculation = _approach(spec)
    return branch_data(record)


async def _shielded(work: asyncio.Future[Any]) -> Any:
    """Await `work` to its end even when cancelled meanwhile (then re-raise): a folder being made or
    removed must not be left half-done."""
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        await work
        raise


async def _check(task: CandidateTask, record: BranchRecordData) -> Speculation:
    """Write the candidate into its own folder and run the check there; the folder is removed
    after."""
    spec, check = task["candidate"], task["check"]
    made = asyncio.ensure_future(
        asyncio.to_thread(CheckFolder.create, spec["parent_id"], spec["id"], check["repo"])
    )
    try:
        folder = await _shielded(made)
    except asyncio.CancelledError:
        await asyncio.to_thread(made.result().remove)
        raise
    except (GitError, OSError) as exc:
        return {**_made(record), "refused": f"its folder could not be made: {exc}"[:300]}
    try:
        reply = CandidateAnswer.model_validate(record["output"])
        try:
            folder.write(
                check["file"], reply.answer if reply.answer.endswith("\n") else reply.answer + "\n"
            )
            for extra in reply.files:
                folder.write(extra.path, extra.content)
        except PathRefused as exc:
            return {
                **_made(record),
                "refused": f"it writes outside its folder: {exc}"[:300],
            }
        result = await run_check(
            check["command"],
            folder.tree.root,
            folder.tree.resolve(check["file"]),
            check["timeout_s"],
            [folder.tree.repo] if folder.in_repo else [],
        )
    finally:
        await _shielded(asyncio.ensure_future(asyncio.to_thread(folder.remove)))
    result["passed_tests"] = passed_tests(result["output"])
    result["failed_tests"] = failed_tests(result["output"])
    return {**_made(record), "check": result}


async def candidate(state: CandidateTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Make one candidate (or take the one a killed run already made) and, with a check, check
    it."""
    task = state
    ctx = context_of(runtime)
    spec, checked = task["candidate"], bool(task["check"]["command"])
    if (
        checked or task["check"]["repo"]
    ):  # the entry refuses these when served; so does every step after it
        refuse_when_served("a candidate's check command or repository")
    cancel_rest = setting(
        ctx.early_stop
    )  # off (--no-early-stop): every candidate is made and checked
    services, fan_out = services_of(ctx), task["fan_out"]
    limit = fan_out_limit(services, fan_out, setting(ctx.max_concurrency))
    watch = services.shared(fan_out, CandidateWatch, "candidates")
    results = CandidateResults(runtime.store, tenant_of(task.get("tenant")), spec["parent_id"])
    life = Lifecycle([{"state": "PENDING", "at": spec["planned_at"], "reason": ""}])
    life.move("DISPATCHED")
    record: BranchRecordData | None = None
    budget = tally_of(services, task["budget"]) if task.get("budget") is not None else None

    async def attempt() -> BranchRecordData:
        nonlocal record
        current = asyncio.current_task()
        if checked and cancel_rest and current is not None:
            watch.started(spec["id"], current)
        try:
            record = await results.load(spec["id"])
            if record is None:
                async with limit:
                    if budget is not None and (
                        stop := budget.reached()
                    ):  # checked when its turn comes
                        if checked and cancel_rest:
                            watch.finished(spec["id"], False)
                        return _cancelled(spec, life, None, stop, cause=BUDGET_CAUSE)
                    seen = budget.seen() if budget is not None else None
                    record = await _generate(task, ctx, life)
                if (
                    budget is not None
                ):  # counted before anything else is awaited: siblings check it at once
                    record["budget_seen"] = seen
                    budget.add(record)
                await results.save(spec["id"], record)
            else:
                _made(record)["reused"] = True  # made before a resume: not asked again
            if budget is not None:
                budget.add(record)
            if not checked or record["status"] != "ok":
                if checked:
                    watch.finished(spec["id"], False)
                return record
            record["speculation"] = checked_spec = await _check(task, record)
            found = checked_spec.get("check") or {}
            won = watch.finished(spec["id"], bool(found.get("passed")))
            checked_spec["result"] = "won" if won else "passed" if found.get("passed") else "failed"
            return record
        except asyncio.CancelledError:
            if spec["id"] not in watch.cancelled:
                raise
            return _cancelled(spec, life, record, watch.reason)

    with holding(budget):  # the candidate's requests are held against the run's budget first
        return {"branches": [await asyncio.ensure_future(attempt())]}


def _cancelled(
    spec: CandidateSpec,
    life: Lifecycle,
    made: BranchRecordData | None,
    why: str,
    cause: str | None = None,
) -> BranchRecordData:
    """The record of a candidate cancelled because another passed first (or not started: `cause`
    "budget"): kept in the trace, never picked or counted. A candidate already made keeps its reply
    (and its model call's figures).
    """
    if made is not None and made["status"] == "ok":
        return {
            **made,
            "status": "cancelled",
            "speculation": {**_made(made), "result": "cancelled", "why": why},
        }
    life.finish("CANCELLED", why)
    return branch_data(
        BranchRecord(
            id=spec["id"],
            parent_id=spec["parent_id"],
            kind="candidate",
            status="cancelled",
            model=spec["model"] or None,
            temperature=spec["temperature"],
            state=life.state,
            transitions=life.transitions,
            cause=cause,
            error=why if cause else None,
            speculation={**_approach(spec), "result": "cancelled", "why": why},
        )
    )


def candidate_failed(state: CandidateTask, error: NodeError) -> dict[str, Any]:
    """Error handler: a candidate that crashed outside its own guard is recorded as failed (never
    picked)."""
    spec = state["candidate"]
    message = f"{type(error.error).__name__}: {error.error}"[:500]
    life = Lifecycle([{"state": "PENDING", "at": spec["planned_at"], "reason": ""}])
    life.finish("ESCALATED", message)
    return {
        "branches": [
            BranchRecord(
                id=spec["id"],
                parent_id=spec["parent_id"],
                kind="candidate",
                status="failed",
                error=message,
                cause="crash",
                model=spec["model"] or None,
                temperature=spec["temperature"],
                state=life.state,
                transitions=life.transitions,
                speculation=_approach(spec),
            ).model_dump()
        ]
    }
