"""Run a group of business branches (`direct`, `slice`, `vote`) and record each one.

Each branch is isolated: its failure becomes a `failed` or `timeout` record with the
error, attempts and tokens it spent, never an exception that would abort its siblings.
The node's `error_handler` (`work_failed`) covers what escapes anyway. Every record
carries its lifecycle (state/lifecycle.py); a straggler may race a backup copy
(logic/stragglers.py); an escalated branch keeps its input for the dead-letter list.
"""

from __future__ import annotations

import asyncio

from langgraph.errors import NodeError
from langgraph.runtime import Runtime

from parallax.logic.stragglers import StragglerWatch, run_watched
from parallax.logic.vote import normalize_answer
from parallax.prompts.solve import answer_messages, slice_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.run_context import context_of
from parallax.runtime.superstep import superstep_limit, superstep_shared
from parallax.state.context import Context
from parallax.state.lifecycle import Lifecycle
from parallax.state.payloads import Answer, BranchRecord, SliceFinding

INPUT_FIELDS = ("kind", "text", "question", "playbook", "model", "temperature", "index", "total", "brief")


def _identity(spec: dict) -> dict:
    return {"id": spec["id"], "parent_id": spec["parent_id"], "kind": spec["kind"],
            "slice_index": spec["index"] if spec["kind"] == "slice" else None,
            "playbook_item_ids": [item["id"] for item in spec["playbook"]]}


def input_of(spec: dict) -> dict:
    """What an escalated branch was asked: enough for `dlq retry` to ask it again."""
    return {k: spec[k] for k in INPUT_FIELDS if k in spec}


def planned(spec: dict) -> Lifecycle:
    """A branch's lifecycle from the moment the fan-out planned it."""
    return Lifecycle([{"state": "PENDING", "at": spec.get("planned_at", 0.0), "reason": ""}])


async def run_branch(spec: dict, ctx: Context, life: Lifecycle) -> dict:
    """One branch: its prompt holds only its own text, the question and its lessons."""
    if spec["kind"] == "slice":
        messages = slice_messages(spec["brief"], spec["question"], spec["text"], spec["index"], spec["total"], spec["playbook"])
        schema = SliceFinding
    else:
        short = spec["kind"] == "vote"
        messages = answer_messages(spec["text"], spec["question"], spec["playbook"], short=short)
        schema = Answer
    record, reply = await call_branch(_identity(spec), messages, schema, ctx, model=spec["model"],
                                      temperature=spec["temperature"], lifecycle=life)
    if spec["kind"] == "vote" and reply is not None:
        record.vote = normalize_answer(reply.answer)
    if reply is None:
        record.input = input_of(spec)
    return record.model_dump()


async def work(task: dict, runtime: Runtime[Context]) -> dict:
    """A `Send` target: run this group's branches under the fan-out's shared limit and straggler watch."""
    ctx = context_of(runtime)
    limit = superstep_limit(runtime, ctx.max_concurrency)
    watch = superstep_shared(runtime, lambda: StragglerWatch(ctx.straggler_factor, ctx.straggler_min_s, model=ctx.model),
                             "stragglers")

    async def bounded(spec: dict) -> dict:
        life = planned(spec)
        life.move("DISPATCHED")
        async with limit:
            return await run_watched(lambda copy_life: run_branch(spec, ctx, copy_life), life, watch, limit)

    return {"branches": list(await asyncio.gather(*(bounded(s) for s in task["branches"])))}


def work_failed(task: dict, error: NodeError) -> dict:
    """Error handler: every branch of a group that crashed is recorded as failed (and escalated)."""
    message = f"{type(error.error).__name__}: {error.error}"[:500]
    records = []
    for spec in task["branches"]:
        life = planned(spec)
        life.finish("ESCALATED", message)
        records.append(BranchRecord(**_identity(spec), model=spec["model"] or None, temperature=spec["temperature"],
                                    status="failed", error=message, state=life.state, transitions=life.transitions,
                                    input=input_of(spec)).model_dump())
    return {"branches": records}
