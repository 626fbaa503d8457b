"""Run a group of business branches (`direct`, `slice`, `vote`) and record each one.

Each branch is isolated: its failure becomes a `failed` or `timeout` record with the
error, attempts and tokens it spent, never an exception that would abort its siblings.
The node's `error_handler` (`work_failed`) covers what escapes anyway.
"""

from __future__ import annotations

import asyncio

from langgraph.errors import NodeError
from langgraph.runtime import Runtime

from nodes.branch_call import call_branch
from nodes.concurrency import superstep_limit
from nodes.route import context_of
from nodes.vote import normalize_answer
from prompts.solve import answer_messages, slice_messages
from state.context import Context
from state.payloads import Answer, BranchRecord, SliceFinding


def _identity(spec: dict) -> dict:
    return {"id": spec["id"], "parent_id": spec["parent_id"], "kind": spec["kind"],
            "slice_index": spec["index"] if spec["kind"] == "slice" else None,
            "playbook_item_ids": [item["id"] for item in spec["playbook"]]}


async def run_branch(spec: dict, ctx: Context) -> dict:
    """One branch: its prompt holds only its own text, the question and its lessons."""
    if spec["kind"] == "slice":
        messages = slice_messages(spec["brief"], spec["question"], spec["text"], spec["index"], spec["total"], spec["playbook"])
        schema = SliceFinding
    else:
        short = spec["kind"] == "vote"
        messages = answer_messages(spec["text"], spec["question"], spec["playbook"], short=short)
        schema = Answer
    record, reply = await call_branch(_identity(spec), messages, schema, ctx,
                                      model=spec["model"], temperature=spec["temperature"])
    if spec["kind"] == "vote" and reply is not None:
        record.vote = normalize_answer(reply.answer)
    return record.model_dump()


async def work(task: dict, runtime: Runtime[Context]) -> dict:
    """A `Send` target: run this group's branches under the fan-out's shared limit."""
    ctx = context_of(runtime)
    limit = superstep_limit(runtime, ctx.max_concurrency)

    async def bounded(spec: dict) -> dict:
        async with limit:
            return await run_branch(spec, ctx)

    return {"branches": list(await asyncio.gather(*(bounded(s) for s in task["branches"])))}


def work_failed(task: dict, error: NodeError) -> dict:
    """Error handler: every branch of a group that crashed is recorded as failed."""
    message = f"{type(error.error).__name__}: {error.error}"[:500]
    return {"branches": [BranchRecord(**_identity(s), model=s["model"] or None, temperature=s["temperature"],
                                      status="failed", error=message).model_dump() for s in task["branches"]]}
