"""One training task, end to end: solve with the current playbook, score, reflect, curate.

A `Send` target of the learn graph, one per task of a batch. Keeping the four steps in
one branch means a batch of B tasks is B branches in a single superstep, while each
step still makes its own model call on this one run only.
"""

from __future__ import annotations

from langgraph.errors import NodeError
from langgraph.runtime import Runtime

from nodes.curate import curate, tag_operations
from nodes.evaluate import solve_one
from nodes.reflect import reflect
from nodes.route import context_of
from state.context import Context


async def learn_from_task(payload: dict, runtime: Runtime[Context]) -> dict:
    ctx = context_of(runtime)
    task, items, version = payload["task"], payload["items"], payload["version"]
    run = await solve_one(task, items, version, ctx, payload.get("mode", "auto"))
    used_ids = sorted({i for b in run.get("branches", []) for i in b.get("playbook_item_ids", [])})
    used = [i for i in items if i["id"] in used_ids]
    reflect_record, reflection = await reflect(run, task, used, ctx)
    provenance = [reflect_record.id, run.get("trace_id") or reflect_record.id]
    operations, curate_record = [], None
    if reflection is not None:
        curate_record, operations = await curate(reflection, provenance, ctx)
        operations = tag_operations(reflection, set(used_ids), provenance) + operations
    records = [r.model_dump() for r in (reflect_record, curate_record) if r is not None]
    return {"runs": [{
        "task_id": task.get("id"), "trace_id": run.get("trace_id", ""), "status": run["status"],
        "answer": run.get("answer", ""), "correct": run["correct"], "scorer": run["scorer"],
        "used_item_ids": used_ids, "reflection_id": reflect_record.id,
        "reflection": reflection.model_dump() if reflection else None,
        "operations": [op.model_dump() for op in operations], "records": records,
    }]}


def learn_from_task_failed(payload: dict, error: NodeError) -> dict:
    """Error handler: a branch that crashed is a failed run with nothing to learn from."""
    return {"runs": [{
        "task_id": payload["task"].get("id"), "trace_id": "", "status": "failed", "answer": "", "correct": False,
        "scorer": "execution", "used_item_ids": [], "reflection_id": "", "reflection": None, "operations": [],
        "records": [], "error": f"{type(error.error).__name__}: {error.error}"[:500],
    }]}
