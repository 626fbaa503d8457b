"""One plan task: wait for its dependencies, take a slot, run it, leave its result.

Every outcome becomes a record its dependants receive (docs/internals/plans.md).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

from langgraph.errors import NodeError
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from parallax.logic.budget import BUDGET_CAUSE, RunBudget, tally_of
from parallax.logic.dag_schedule import DagRun, blocked_by
from parallax.logic.edit_agent import run_edit
from parallax.logic.evaluate import Solver
from parallax.logic.plan_check import fingerprint
from parallax.logic.plan_tasks import (
    board_write,
    dependency_results,
    reusable,
    task_input,
    task_record,
)
from parallax.logic.plan_tools import ToolError, run_tool
from parallax.logic.routing import InvalidInput
from parallax.logic.speculative_edit import run_speculative_edit
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of, refuse_when_served, subgraph_config, tenant_of
from parallax.runtime.services import services_of
from parallax.runtime.storage.edit_conversations import EditConversations
from parallax.runtime.storage.plan_results import PlanResults
from parallax.runtime.worktrees import Worktree, path_part, work_folder
from parallax.state.context import Context, setting
from parallax.state.plan import Plan, PlanTask, TaskPayload
from parallax.state.vocabulary import TASK_ROUTE, per_slice

STATUS_OF_RUN = {"ok": "DONE", "needs_review": "NEEDS_REVIEW", "failed": "FAILED"}


def edit_branch(trace_id: str, task_id: int, round_: int, suffix: str = "") -> str:
    return (
        f"parallax/{path_part(trace_id, 'trace id')[:8]}/task-{task_id}"
        + (f"-r{round_}" if round_ else "")
        + suffix
    )


def worktree_dir(trace_id: str, name: str) -> Path:
    return work_folder("worktrees", trace_id, name)


async def _solve(
    task: PlanTask, payload: TaskPayload, goal: str, inputs: str, ctx: Context, solve: Solver
) -> dict[str, Any]:
    text = "\n\n".join(x for x in (goal, inputs) if x)
    route = TASK_ROUTE[task.kind]
    if per_slice(route):  # the task reads the document, asking its goal of every slice
        document = task.inputs.get("document") or payload["document"]
        run_input: dict[str, Any] = {"task": document, "question": text, "mode": route}
    else:
        run_input = {"task": text, "mode": route}
    run_input.update(
        tenant=tenant_of(payload.get("tenant")),
        playbook=payload["playbook"],
        votes=payload["votes"],
        parent_trace=payload["trace_id"],
    )
    budget = payload.get("budget")
    if (
        budget is not None
    ):  # the plan's budget: the task's run checks the plan's tally (the same key)
        run_input.update({k: v for k, v in budget.items() if k in ("max_cost", "max_tokens")})
    if "min_votes" in payload:
        run_input["min_votes"] = payload["min_votes"]
    # the subgraph's own checkpoint is written once, at its end: the task is the unit that is not
    # redone
    try:
        run = await solve.ainvoke(run_input, subgraph_config(), context=ctx, durability="exit")
    except InvalidInput as exc:
        return {"status": "FAILED", "reason": str(exc)}
    return {
        "status": STATUS_OF_RUN[run["status"]],
        "reason": run.get("reason", ""),
        "output": run.get("answer", ""),
        "branches": run.get("branches", []),
        "trace_id": run.get("trace_id", ""),
        "mode": run.get("mode"),
        "confidence": run.get("confidence"),
        "vote_counts": run.get("vote_counts", {}),
        "verification": run.get("verification", {}),
    }


async def _speculative_edit(
    task: PlanTask,
    payload: TaskPayload,
    goal: str,
    inputs: str,
    ctx: Context,
    store: BaseStore | None,
) -> dict[str, Any]:
    """K candidate patches at once, each in its own worktree; the first whose tests pass is the
    task's branch."""
    name = f"task-{task.id}-r{payload['round']}"
    conversations = EditConversations(store, tenant_of(payload.get("tenant")), payload["trace_id"])
    found = await run_speculative_edit(
        Path(payload["repo"]),
        payload["repo_base"],
        lambda i: edit_branch(payload["trace_id"], task.id, payload["round"], f"-c{i + 1}"),
        lambda i: worktree_dir(payload["trace_id"], f"{name}-c{i + 1}"),
        task.writes,
        "\n\n".join(x for x in (goal, inputs) if x),
        ctx,
        {
            "id": f"edit-{payload['trace_id'][:8]}-{task.id}",
            "parent_id": payload["trace_id"],
            "kind": "edit",
        },
        test_command=payload["test_command"],
        candidates=payload["candidates"],
        timeout_s=setting(ctx.tool_timeout_s),
        keep=lambda cid, conversation: conversations.save(
            f"{payload['round']}.{cid}", conversation, setting(ctx.trace_prompt_chars)
        ),
    )
    outcome = found.outcome
    return {
        "status": outcome.status,
        "reason": outcome.reason,
        "branches": outcome.records,
        "output": (
            outcome.summary
            or (f"changed {', '.join(outcome.files)}" if outcome.files else "no change")
        ),
        "edit": {
            "branch": found.branch,
            "base": payload["repo_base"],
            "commit": outcome.commit,
            "files": outcome.files,
            "writes": task.writes,
            "refused": outcome.refused,
            "candidates": found.candidates,
        },
    }


async def _edit(
    task: PlanTask,
    payload: TaskPayload,
    goal: str,
    inputs: str,
    ctx: Context,
    store: BaseStore | None,
) -> dict[str, Any]:
    refuse_when_served("an edit task (a repository, a worktree, a test command)")
    if payload.get("candidates", 1) > 1 and payload.get("test_command"):
        return await _speculative_edit(task, payload, goal, inputs, ctx, store)
    name = f"task-{task.id}-r{payload['round']}"
    branch = edit_branch(payload["trace_id"], task.id, payload["round"])
    repo = Path(payload["repo"])
    tree = await asyncio.to_thread(
        Worktree.create,
        repo,
        branch,
        payload["repo_base"],
        worktree_dir(payload["trace_id"], name),
        task.writes,
    )
    try:
        identity = {
            "id": f"edit-{payload['trace_id'][:8]}-{task.id}",
            "parent_id": payload["trace_id"],
            "kind": "edit",
        }
        outcome = await run_edit(
            tree,
            "\n\n".join(x for x in (goal, inputs) if x),
            ctx,
            identity,
            test_command=payload.get("test_command", ""),
        )
    finally:
        await asyncio.to_thread(tree.remove)
    return {
        "status": outcome.status,
        "reason": outcome.reason,
        "branches": outcome.records,
        "output": (
            outcome.summary
            or (f"changed {', '.join(outcome.files)}" if outcome.files else "no change")
        ),
        "edit": {
            "branch": branch,
            "base": payload["repo_base"],
            "commit": outcome.commit,
            "files": outcome.files,
            "writes": task.writes,
            "refused": outcome.refused,
        },
    }


async def _execute(
    task: PlanTask,
    plan: Plan,
    payload: TaskPayload,
    dag: DagRun,
    ctx: Context,
    solve: Solver,
    runtime: Runtime[Context],
    budget: RunBudget | None,
) -> dict[str, Any]:
    dependencies = await dag.results_of(task.deps)
    blocked = blocked_by(task, plan, dependencies)
    if blocked:
        return task_record(
            task, payload["round"], dag.fingerprints[task.id], "SKIPPED", reason=blocked
        )
    earlier = reusable(dag.fingerprints[task.id], payload["earlier"])
    if earlier is not None:
        return {**earlier, "round": payload["round"], "reused_from_round": earlier["round"]}
    goal, inputs = task_input(task, dependency_results(task, dependencies))
    async with dag.writes.hold(task.id, task.writes), dag.slots.slot(dag.priority[task.id]):
        if budget is not None and (
            stop := budget.reached()
        ):  # checked when its slot comes, not when it was sent
            return task_record(
                task,
                payload["round"],
                dag.fingerprints[task.id],
                "SKIPPED",
                reason=stop,
                cause=BUDGET_CAUSE,
            )
        started = time.time()
        _announce(runtime, task, payload, "RUNNING")
        if task.kind == "tool":
            try:
                outcome = {
                    "status": "DONE",
                    "output": run_tool(task.inputs, goal, dependency_results(task, dependencies)),
                }
            except ToolError as exc:
                outcome = {"status": "FAILED", "reason": str(exc)}
        elif task.kind == "edit":
            outcome = await _edit(task, payload, goal, inputs, ctx, runtime.store)
        else:
            outcome = await _solve(task, payload, goal, inputs, ctx, solve)
        if budget is not None:
            budget.absorb(cast(list[dict[str, Any]], outcome.get("branches") or []))
    return task_record(
        task,
        payload["round"],
        dag.fingerprints[task.id],
        outcome.pop("status"),
        started_at=round(started, 3),
        seconds=round(time.time() - started, 3),
        **outcome,
    )


def _announce(
    runtime: Runtime[Context], task: PlanTask, payload: TaskPayload, status: str, reason: str = ""
) -> None:
    """Live per-task status for the CLI (stream mode "custom")."""
    runtime.stream_writer(
        {
            "plan_task": {
                "id": task.id,
                "round": payload["round"],
                "kind": task.kind,
                "goal": task.goal,
                "deps": task.deps,
                "status": status,
                "reason": reason[:200],
            }
        }
    )


async def run_task(
    payload: TaskPayload, runtime: Runtime[Context], *, solve: Solver
) -> dict[str, Any]:
    """A `Send` target: one task of the plan (`solve` is the solve graph, handed in by
    graphs/plan.py)."""
    ctx = context_of(runtime)
    # held until every task has a result: a task that starts after its dependencies finished must
    # find them; every task of the dispatch carries the same plan, so the first to arrive validates
    # it for all
    dag, release = services_of(ctx).held(
        payload["trace_id"],
        lambda: DagRun(Plan.model_validate(payload["plan"]), setting(ctx.max_concurrency)),
        "plan-dag",
        payload["round"],
    )
    dag.on_complete = release
    plan, task = dag.plan, dag.plan.task(payload["task"]["id"])
    print_ = dag.fingerprints[task.id]
    # the plan's live tally, held from the start by every task of the dispatch (also while one waits
    # for its dependencies), so it outlives each of them and the runs inside them add to the same
    # one
    budget = tally_of(services_of(ctx), payload["budget"]) if "budget" in payload else None
    results = PlanResults(runtime.store, tenant_of(payload.get("tenant")), payload["trace_id"])
    record = None
    try:
        await dag.load_once(lambda: results.load(payload["round"]))
        record = dag.finished(task.id)  # finished in an earlier process: not run again
        if record is None:
            try:
                with holding(
                    budget
                ):  # every request of the run inside the task fits the plan's budget too
                    record = await _execute(task, plan, payload, dag, ctx, solve, runtime, budget)
            except Exception as exc:  # noqa: BLE001 - the boundary: any error is this task's failure, not the plan's
                record = task_record(
                    task,
                    payload["round"],
                    print_,
                    "FAILED",
                    reason=f"{type(exc).__name__}: {exc}"[:500],
                )
            await results.save(record)
    finally:
        # whatever happened, dependants must hear of it; a cancelled task is re-run by LangGraph
        dag.publish(
            task.id,
            record
            or task_record(
                task,
                payload["round"],
                print_,
                "FAILED",
                reason="the task stopped before it finished",
            ),
        )
    _announce(runtime, task, payload, record["status"], record.get("reason", ""))
    where = [*results.namespace, f"{payload['round']}.{task.id}"]
    return {"tasks": [record], "board": board_write(task, plan, record, where)}


def run_task_failed(payload: TaskPayload, error: NodeError) -> dict[str, Any]:
    """Error handler: a task that crashed outside its own guard is recorded as FAILED."""
    plan = Plan.model_validate(payload["plan"])
    task = plan.task(payload["task"]["id"])
    return {
        "tasks": [
            task_record(
                task,
                payload["round"],
                fingerprint(task, plan),
                "FAILED",
                reason=f"{type(error.error).__name__}: {error.error}"[:500],
            )
        ]
    }
