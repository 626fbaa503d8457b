"""Evaluate a playbook: run the solve graph on tasks with given items and score each run.

Used by the learn graph's gate (candidate versus current playbook on the same sample)
and by `parallax eval`. Runs go through the real solve graph, compiled without a
checkpointer: an evaluation is repeatable, so checkpointing each run would only cost time.
The playbook items each run sees are chosen for all tasks at once (one batched embedding
call when the playbook is larger than the budget), not once per run.
"""

from __future__ import annotations

import asyncio

from graphs.solve import builder as solve_builder
from nodes.playbook import select_items
from nodes.score import score
from state.context import Context

solve_graph = solve_builder.compile(checkpointer=False, name="solve")


async def solve_one(task: dict, items: list[dict], version: int, ctx: Context, mode: str = "auto",
                    tenant: str = "default") -> dict:
    """One task through the solve graph with exactly these playbook items (its trace filed under `tenant`)."""
    try:
        run = await solve_graph.ainvoke(
            {"task": task["input"], "mode": mode, "playbook_items": items, "playbook_version": version, "tenant": tenant},
            context=ctx)
    except ValueError as exc:  # input the solve graph refuses (e.g. too long)
        run = {"status": "failed", "answer": "", "reason": str(exc), "branches": [], "trace_id": ""}
    verdict = score(run, task.get("target"), task["input"], task.get("scorer", "auto"))
    return {**run, **verdict, "task_id": task.get("id")}


async def evaluate(tasks: list[dict], items: list[dict], version: int, ctx: Context, *, concurrency: int = 8,
                   mode: str = "auto", tenant: str = "default", on_result=None) -> dict:
    """Accuracy over `tasks`; `errors` counts runs that ended `failed`."""
    limit = asyncio.Semaphore(concurrency)
    selections = await select_items(items, [t["input"] for t in tasks], ctx.playbook_chars)

    async def bounded(task: dict, chosen: list[dict]) -> dict:
        async with limit:
            result = await solve_one(task, chosen, version, ctx, mode, tenant)
        if on_result:
            on_result(result)
        return result

    results = await asyncio.gather(*(bounded(t, s) for t, s in zip(tasks, selections)))
    correct = sum(r["correct"] for r in results)
    return {"accuracy": round(correct / len(results), 4) if results else 0.0, "n": len(results),
            "errors": sum(r["status"] == "failed" for r in results),
            "results": [{"task_id": r["task_id"], "correct": r["correct"], "answer": r.get("answer", ""),
                         "status": r["status"], "trace_id": r.get("trace_id", ""), "feedback": r["feedback"]}
                        for r in results]}
