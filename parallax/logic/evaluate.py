"""A playbook evaluated: the solve graph (handed in by the caller) on tasks, each run scored.

Runs go without a checkpointer (an evaluation is repeatable); the items each run sees are chosen for
all tasks at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from parallax.logic.failures import failures_by_cause, run_failure
from parallax.logic.playbook_selection import retrieval_text, select_items
from parallax.logic.scoring import score
from parallax.runtime.run_context import subgraph_config
from parallax.state.context import Context, setting
from parallax.state.records import PlaybookItemData, PromptVersion, TaskData

Solver = Any
"""A compiled solve graph (`ainvoke(input, context=...)`), compiled without a checkpointer."""


async def solve_one(
    solve: Solver,
    task: TaskData,
    items: list[PlaybookItemData],
    version: int,
    ctx: Context,
    mode: str = "auto",
    tenant: str = "default",
    prompts: dict[str, PromptVersion] | None = None,
    votes: int | None = None,
) -> dict[str, Any]:
    """One task through the solve graph with exactly these playbook items (its trace filed under
    `tenant`); `prompts` pins prompt versions ({name: {"version", "system", "user"}}, a prompt
    edit's gate); `votes`: the most votes a vote asks (None: the graph's default)."""
    given: dict[str, Any] = {
        "task": task["input"],
        "mode": mode,
        "playbook_items": items,
        "playbook_version": version,
        "tenant": tenant,
    }
    if (
        task.get("target") is not None
    ):  # the trace keeps whether the run was right (parallax stats, export)
        given.update(target=str(task["target"]), scorer=task.get("scorer") or "auto")
    if prompts:
        given["prompt_overrides"] = prompts
    if votes is not None:
        given["votes"] = votes
    try:
        run = await solve.ainvoke(given, subgraph_config(), context=ctx)
    except ValueError as exc:  # input the solve graph refuses (e.g. too long)
        run = {
            "status": "failed",
            "answer": "",
            "reason": str(exc),
            "branches": [],
            "trace_id": "",
            "cause": "input",
        }
    except Exception as exc:  # noqa: BLE001 - one task's crash is that task's failure, not the batch's
        run = {
            "status": "failed",
            "answer": "",
            "reason": f"{type(exc).__name__}: {exc}",
            "branches": [],
            "trace_id": "",
            "cause": "crash",
        }
    # the scorer as given: a caller's explicit null reaches `score` unchanged
    scorer = cast(str, task.get("scorer", "auto"))
    verdict = score(run, task.get("target"), task["input"], scorer)
    return {**run, **verdict, "task_id": task.get("id"), **(run_failure(run) or {})}


def result_line(run: dict[str, Any], traced: bool = True) -> dict[str, Any]:
    """One task's line of an evaluation: a failed task carries its `cause` and `error`; the trace id
    only when the run kept a trace (`traced`), so that every printed id resolves with `parallax
    trace`.
    """
    line = {
        "task_id": run["task_id"],
        "correct": run["correct"],
        "answer": run.get("answer", ""),
        "status": run["status"],
    }
    if traced and run.get("trace_id"):
        line["trace_id"] = run["trace_id"]
    line["feedback"] = run["feedback"]
    if run.get("cause"):
        line.update(cause=run["cause"], error=run["error"])
    return line


async def evaluate(
    solve: Solver,
    tasks: list[TaskData],
    items: list[PlaybookItemData],
    version: int,
    ctx: Context,
    *,
    concurrency: int = 8,
    mode: str = "auto",
    tenant: str = "default",
    on_result: Callable[[dict[str, Any]], object] | None = None,
    prompts: dict[str, PromptVersion] | None = None,
    traced: bool = True,
    votes: int | None = None,
) -> dict[str, Any]:
    """Accuracy over `tasks`; `errors` counts runs that ended `failed`, `failures` counts them by
    cause. `traced=False` when `solve` keeps no trace (compiled without a store, outside a graph
    that has one).
    """
    limit = asyncio.Semaphore(concurrency)
    selections = await select_items(
        items,
        [retrieval_text(t["input"]) for t in tasks],
        setting(ctx.playbook_chars),
        ctx.embedder,
    )

    async def bounded(task: TaskData, chosen: list[PlaybookItemData]) -> dict[str, Any]:
        async with limit:
            result = await solve_one(
                solve, task, chosen, version, ctx, mode, tenant, prompts, votes
            )
        if on_result:
            on_result(result)
        return result

    results = await asyncio.gather(*(bounded(t, s) for t, s in zip(tasks, selections, strict=True)))
    correct = sum(r["correct"] for r in results)
    lines = [result_line(r, traced) for r in results]
    return {
        "accuracy": round(correct / len(results), 4) if results else 0.0,
        "n": len(results),
        "errors": sum(r["status"] == "failed" for r in results),
        "failures": failures_by_cause(lines),
        "results": lines,
    }


def validated(
    progress: Callable[[Any], None], of: str, total: int
) -> Callable[[dict[str, Any]], None]:
    """`evaluate`'s `on_result` for a learn run's gate: each validation run of the `head` or the
    `candidate` as an event of the graph's custom stream (`progress` is LangGraph's stream writer),
    which `parallax learn` shows as it comes.
    """
    return lambda result: progress(
        {
            "learn": "validation",
            "of": of,
            "total": total,
            "correct": bool(result["correct"]),
            "cause": result.get("cause"),
        }
    )


def correct_by_task(result: dict[str, Any]) -> dict[str, bool]:
    """Task id -> right or not, from an `evaluate` result (the gate's paired comparison)."""
    return {str(r["task_id"]): bool(r["correct"]) for r in result["results"]}
