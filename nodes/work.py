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
from pydantic import BaseModel

from parallax.logic.branch_plans import branch_messages, prompt_name
from parallax.logic.stragglers import StragglerWatch, run_watched
from parallax.logic.user_schema import answer_schema, normal, reply_model, slice_schema
from parallax.logic.vote import normalize_answer
from parallax.runtime.branch_call import call_branch
from parallax.runtime.run_context import context_of
from parallax.runtime.superstep import superstep_limit, superstep_shared
from parallax.state.context import Context
from parallax.state.lifecycle import Lifecycle
from parallax.state.payloads import Answer, BranchRecord, SliceFinding

INPUT_FIELDS = ("kind", "text", "question", "playbook", "model", "temperature", "index", "total", "brief", "prompt",
                "output_schema")


def _identity(spec: dict, template: dict | None = None, typed: bool = False) -> dict:
    return {"id": spec["id"], "parent_id": spec["parent_id"], "kind": spec["kind"],
            "slice_index": spec["index"] if spec["kind"] == "slice" else None,
            "playbook_item_ids": [item["id"] for item in spec["playbook"]],
            "prompt": {"name": prompt_name(spec["kind"], typed), "version": (template or {}).get("version", 0)}}


def _template(spec: dict, prompts: dict | None, typed: bool = False) -> dict | None:
    """The served prompt version of this branch (a dead letter carries its own)."""
    return (prompts or {}).get(prompt_name(spec["kind"], typed)) or spec.get("prompt")


def reply_schema(kind: str, output_schema: dict | None) -> type[BaseModel]:
    """What a business branch must reply: our Answer or SliceFinding, or the user's object wrapped for its kind."""
    if output_schema is None:
        return SliceFinding if kind == "slice" else Answer
    if kind == "slice":
        return reply_model(slice_schema(output_schema), "SliceValues")
    return reply_model(answer_schema(output_schema), "TypedAnswer")


def input_of(spec: dict) -> dict:
    """What an escalated branch was asked: enough for `dlq retry` to ask it again."""
    return {k: spec[k] for k in INPUT_FIELDS if k in spec}


def planned(spec: dict) -> Lifecycle:
    """A branch's lifecycle from the moment the fan-out planned it."""
    return Lifecycle([{"state": "PENDING", "at": spec.get("planned_at", 0.0), "reason": ""}])


async def run_branch(spec: dict, ctx: Context, life: Lifecycle, shared: dict | None = None) -> dict:
    """One branch: its prompt holds only its own text, the question and its lessons, in the served template.
    `shared` is what the fan-out gave all its branches: the served "prompts" and the run's "meta"data."""
    output_schema = (shared or {}).get("output_schema", spec.get("output_schema"))
    typed = output_schema is not None
    template = _template(spec, (shared or {}).get("prompts"), typed)
    record, reply = await call_branch(_identity(spec, template, typed), branch_messages(spec, template, output_schema),
                                      reply_schema(spec["kind"], output_schema), ctx,
                                      model=spec["model"], temperature=spec["temperature"], lifecycle=life,
                                      run_metadata=(shared or {}).get("meta"))
    if spec["kind"] == "vote" and reply is not None:
        record.vote = normal(reply.model_dump()["data"]) if typed else normalize_answer(reply.model_dump()["answer"])
    if reply is None:
        asked = {**spec, "prompt": template} if template else dict(spec)
        record.input = input_of({**asked, "output_schema": output_schema} if typed else asked)
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
            return await run_watched(lambda copy_life: run_branch(spec, ctx, copy_life, task), life, watch,
                                     limit)

    return {"branches": list(await asyncio.gather(*(bounded(s) for s in task["branches"])))}


def work_failed(task: dict, error: NodeError) -> dict:
    """Error handler: every branch of a group that crashed is recorded as failed (and escalated)."""
    message = f"{type(error.error).__name__}: {error.error}"[:500]
    records = []
    for spec in task["branches"]:
        life = planned(spec)
        life.finish("ESCALATED", message)
        typed = task.get("output_schema") is not None
        template = _template(spec, task.get("prompts"), typed)
        records.append(BranchRecord(**_identity(spec, template, typed), model=spec["model"] or None,
                                    temperature=spec["temperature"], status="failed", error=message, cause="crash",
                                    state=life.state, transitions=life.transitions, input=input_of(spec)).model_dump())
    return {"branches": records}
