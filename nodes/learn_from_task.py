"""One training task: solve with the current playbook, score, reflect, check lessons, curate.

A `Send` target carrying a group of a batch's tasks, so a batch is one superstep. A stored run
(`learn --from-traces`) is reflected on as it happened, not solved again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.errors import NodeError
from langgraph.runtime import Runtime

from parallax.logic.budget import spent_by, tally_of
from parallax.logic.curate import curate, tag_operations
from parallax.logic.evaluate import Solver, solve_one
from parallax.logic.lesson_quality import keep_grounded
from parallax.logic.playbook_selection import retrieval_text, select_items
from parallax.logic.reflect import reflect
from parallax.prompts.templates import SOLVE_PROMPTS
from parallax.runtime import embeddings
from parallax.runtime.fan_out_limit import fan_out_limit
from parallax.runtime.lesson_screening import screen_lessons, screen_operations
from parallax.runtime.request_budget import Purse, holding
from parallax.runtime.run_context import context_of, tenant_of
from parallax.runtime.services import services_of
from parallax.state.context import Context, setting
from parallax.state.payloads import BranchRecord
from parallax.state.playbook import Operation
from parallax.state.records import LearnTask, PlaybookItemData, PromptVersion, TaskData


async def learn_from_task(
    payload: LearnTask, runtime: Runtime[Context], *, solve: Solver
) -> dict[str, Any]:
    """A `Send` target: this group's tasks and the playbook head's items, under the batch's shared
    limit."""
    ctx = context_of(runtime)
    limit = fan_out_limit(services_of(ctx), payload["fan_out"], setting(ctx.max_concurrency))
    tasks = payload["tasks"]
    selections = await select_items(
        payload["items"],
        [retrieval_text(t["input"]) for t in tasks],
        setting(ctx.playbook_chars),
        ctx.embedder,
    )
    # a stored run used the items it was served: its verdicts may name any active item of the head
    selections = [
        payload["items"] if t.get("run") else chosen
        for t, chosen in zip(tasks, selections, strict=True)
    ]

    progress = (
        runtime.stream_writer
    )  # each task as it ends, for a watching caller (cli/learn_report.py)

    async def bounded(task: TaskData, items: list[PlaybookItemData]) -> dict[str, Any]:
        async with limit:
            run = await learn_one(
                solve,
                task,
                items,
                payload["version"],
                payload["mode"],
                ctx,
                tenant_of(payload.get("tenant")),
                payload.get("prompts"),
                payload.get("votes"),
            )
        progress(
            {
                "learn": "task",
                "correct": bool(run["correct"]),
                "cause": run.get("cause"),
                "lessons": len((run.get("reflection") or {}).get("lessons") or []),
            }
        )
        return run

    # the learn run's budget holds every request of these tasks' runs, reflections and curations
    budget, own = (
        (tally_of(services_of(ctx), payload["budget"]) if "budget" in payload else None),
        Purse(),
    )
    refused = budget.refused if budget is not None else 0
    with holding(budget, own):
        runs = list(
            await asyncio.gather(*(bounded(t, s) for t, s in zip(tasks, selections, strict=True)))
        )
    cut = budget is not None and budget.refused > refused
    return {
        "runs": runs,
        "spend": spent_by(own),
        **(
            {
                "budget_stop": (
                    f"budget reached: {budget.describe()}: some runs of the batch were cut short"
                )
            }
            if cut and budget is not None
            else {}
        ),
    }


async def learn_one(
    solve: Solver,
    task: TaskData,
    items: list[PlaybookItemData],
    version: int,
    mode: str,
    ctx: Context,
    tenant: str,
    prompts: dict[str, PromptVersion] | None = None,
    votes: int | None = None,
) -> dict[str, Any]:
    prompts = prompts or {}
    if task.get(
        "run"
    ):  # a stored run (learn --from-traces): reflected on as it happened, with its signal
        run: dict[str, Any] = dict(task["run"])
        used_ids = [i for i in run["used_item_ids"] if i in {item["id"] for item in items}]
    else:
        run = await solve_one(
            solve,
            task,
            items,
            version,
            ctx,
            mode,
            tenant,
            {n: p for n, p in prompts.items() if n in SOLVE_PROMPTS} or None,
            votes,
        )
        used_ids = sorted(
            {i for b in run.get("branches", []) for i in b.get("playbook_item_ids", [])}
        )
    used = [i for i in items if i["id"] in used_ids]
    reflect_record, reflection = await reflect(run, task, used, ctx, prompts.get("reflect"))
    provenance = [reflect_record.id, run.get("trace_id") or reflect_record.id]
    operations: list[Operation] = []
    curate_record: BranchRecord | None = None
    quarantined: list[dict[str, Any]] = []
    if reflection is not None:
        # untrusted text: screened before the curator reads it, and again before it is merged
        lessons, quarantined = screen_lessons(reflection.lessons, "reflection", provenance)
        grounds = f"{task['input']}\n{run.get('answer', '')}\n{run['feedback']}"
        lessons, rejected = await asyncio.to_thread(
            keep_grounded, lessons, grounds, ctx.embedder or embeddings.embed, provenance
        )
        quarantined += rejected
        reflection = reflection.model_copy(update={"lessons": lessons})
        curate_record, curated = await curate(reflection, provenance, ctx, prompts.get("curate"))
        curated, held = screen_operations(curated, "curator")
        quarantined += held
        operations = tag_operations(reflection, set(used_ids), provenance) + curated
    records = [r.model_dump() for r in (reflect_record, curate_record) if r is not None]
    return {
        "task_id": task.get("id"),
        "trace_id": run.get("trace_id", ""),
        "status": run["status"],
        "answer": run.get("answer", ""),
        "correct": run["correct"],
        "scorer": run["scorer"],
        **({"cause": run["cause"], "error": run["error"]} if run.get("cause") else {}),
        "used_item_ids": used_ids,
        "reflection_id": reflect_record.id,
        "reflection": reflection.model_dump() if reflection else None,
        "operations": [op.model_dump() for op in operations],
        "records": records,
        "quarantined": quarantined,
    }


def learn_from_task_failed(payload: dict[str, Any], error: NodeError) -> dict[str, Any]:
    """Error handler: every task of a group that crashed is a failed run with nothing to learn
    from."""
    return {
        "runs": [
            {
                "task_id": task.get("id"),
                "trace_id": "",
                "status": "failed",
                "answer": "",
                "correct": False,
                "scorer": "execution",
                "used_item_ids": [],
                "reflection_id": "",
                "reflection": None,
                "operations": [],
                "records": [],
                "cause": "crash",
                "error": f"{type(error.error).__name__}: {error.error}"[:500],
            }
            for task in payload["tasks"]
        ]
    }
