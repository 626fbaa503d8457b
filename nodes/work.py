"""Run a group of business branches (`direct`, `slice`, `vote`) and record each one.

Each branch is isolated: a failure becomes its record, never an exception that aborts its siblings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from langgraph.errors import NodeError
from langgraph.runtime import Runtime

from parallax.logic.branch_kinds import reply_schema
from parallax.logic.branch_plans import VotePrompts, branch_messages, prompt_name
from parallax.logic.budget import BUDGET_CAUSE, tally_of
from parallax.logic.stragglers import StragglerWatch, run_watched
from parallax.logic.user_schema import normal
from parallax.logic.vote import final_value
from parallax.logic.vote_watch import VoteWatch
from parallax.runtime.branch_call import call_branch
from parallax.runtime.fan_out_limit import fan_out_limit
from parallax.runtime.prefix_lead import PrefixLead
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of
from parallax.runtime.services import services_of
from parallax.runtime.wave_request import MAX_CHOICES, Seat, WaveRequest
from parallax.state.context import Context, setting
from parallax.state.lifecycle import Lifecycle
from parallax.state.payloads import BranchRecord
from parallax.state.records import BranchInput, BranchSpec, PromptVersion, WorkShared, WorkTask
from parallax.state.vocabulary import BUSINESS_KINDS

INPUT_FIELDS = (
    "kind",
    "text",
    "question",
    "playbook",
    "model",
    "temperature",
    "index",
    "total",
    "brief",
    "prompt",
    "output_schema",
)


def _identity(
    spec: BranchSpec, template: PromptVersion | None = None, typed: bool = False
) -> dict[str, Any]:
    return {
        "id": spec["id"],
        "parent_id": spec["parent_id"],
        "kind": spec["kind"],
        "slice_index": spec["index"] if BUSINESS_KINDS[spec["kind"]].per_slice else None,
        "playbook_item_ids": [item["id"] for item in spec["playbook"]],
        "prompt": {
            "name": prompt_name(spec["kind"], typed),
            "version": template.get("version", 0) if template else 0,
        },
    }


def _template(
    spec: BranchSpec, prompts: dict[str, PromptVersion] | None, typed: bool = False
) -> PromptVersion | None:
    """The served prompt version of this branch (a dead letter carries its own)."""
    return (prompts or {}).get(prompt_name(spec["kind"], typed)) or spec.get("prompt")


def input_of(spec: BranchSpec) -> BranchInput:
    """What an escalated branch was asked: enough for `dlq retry` to ask it again."""
    fields: dict[str, object] = dict(spec)
    return cast(
        BranchInput, {k: fields[k] for k in INPUT_FIELDS if k in fields}
    )  # INPUT_FIELDS are BranchInput's keys


def planned(spec: BranchSpec) -> Lifecycle:
    """A branch's lifecycle from the moment the fan-out planned it."""
    return Lifecycle([{"state": "PENDING", "at": spec.get("planned_at", 0.0), "reason": ""}])


async def run_branch(
    spec: BranchSpec,
    ctx: Context,
    life: Lifecycle,
    shared: WorkShared | None = None,
    seat: Seat | None = None,
    prompts: VotePrompts | None = None,
) -> dict[str, Any]:
    """One branch: its prompt holds only its own text, the question and its lessons, in the served
    template. `shared` is what the fan-out gave all its branches: the served "prompts" and the run's
    "meta"data. `seat`: a vote's place in the one request its wave's votes of the same model and
    temperature share. `prompts`: the messages its task's votes share, built once
    (logic/branch_plans.py)."""
    output_schema = (
        shared.get("output_schema", spec.get("output_schema"))
        if shared
        else spec.get("output_schema")
    )
    typed = output_schema is not None
    template = _template(spec, shared.get("prompts") if shared else None, typed)
    meta = shared.get("meta") if shared else None
    messages = (
        prompts.messages(spec, template, output_schema)
        if prompts is not None
        else branch_messages(spec, template, output_schema)
    )
    record, reply = await call_branch(
        _identity(spec, template, typed),
        messages,
        reply_schema(spec["kind"], output_schema),
        ctx,
        model=spec["model"],
        temperature=spec["temperature"],
        lifecycle=life,
        run_metadata=dict(meta) if meta is not None else None,
        seat=seat,
    )
    if (
        spec["kind"] == "vote" and reply is not None and record.output is not None
    ):  # the output: the reply, dumped
        record.vote = (
            normal(record.output["data"]) if typed else final_value(record.output["answer"])
        )
    if reply is None:
        asked: BranchSpec = {**spec, "prompt": template} if template else spec.copy()
        if output_schema is not None:
            asked["output_schema"] = output_schema
        record.input = dict(input_of(asked))
    return record.model_dump()


async def work(state: WorkTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """A `Send` target: run this group's branches under the fan-out's shared limit and straggler
    watch; the votes of an adaptive wave also under its vote watch, which cancels them once the vote
    has settled. Votes that share model and temperature take their choices of one request
    (runtime/wave_request.py); the slices of a section run wait for slice 0 to come back, so their
    shared prefix is cached (runtime/prefix_lead.py).
    """
    ctx = context_of(runtime)
    services, fan_out = services_of(ctx), state["fan_out"]
    limit = fan_out_limit(services, fan_out, setting(ctx.max_concurrency))
    watch = services.shared(
        fan_out,
        lambda: StragglerWatch(
            setting(ctx.straggler_factor),
            setting(ctx.straggler_min_s),
            recent=services.recent[setting(ctx.model)],
        ),
        "stragglers",
    )
    wave = state.get("vote_watch")
    votes = (
        services.shared(
            fan_out,
            lambda: VoteWatch(list(wave["earlier"]), wave["threshold"], wave["min_leader"]),
            "votes",
        )
        if wave is not None
        else None
    )
    seats = wave_seats(
        state["branches"], services.takes_n, votes.arrived if votes is not None else None
    )
    slices = [spec["index"] for spec in state["branches"] if BUSINESS_KINDS[spec["kind"]].per_slice]
    lead = services.shared(fan_out, PrefixLead, "prefix") if slices else None
    if lead is not None:
        lead.carries(slices)
    spec_of_budget = state.get("budget")
    budget = tally_of(services, spec_of_budget) if spec_of_budget is not None else None
    prompts = VotePrompts()

    async def copy(spec: BranchSpec, copy_life: Lifecycle, life: Lifecycle) -> dict[str, Any]:
        """The branch, or its straggler backup, which the budget checks too (refused: the original
        runs on alone)."""
        if copy_life is not life and budget is not None and (stop := budget.reached()):
            copy_life.finish("CANCELLED", stop)
            return {"status": "cancelled", "cause": BUDGET_CAUSE}
        return await run_branch(spec, ctx, copy_life, state, seats.get(spec["id"]), prompts)

    async def bounded(spec: BranchSpec) -> dict[str, Any]:
        life = planned(spec)
        life.move("DISPATCHED")
        if votes is not None:
            votes.started(spec["id"], asyncio.current_task())  # type: ignore[arg-type]  # gather wraps each in a task
        try:
            if lead is not None:  # slice 0 first: its siblings then find their shared prefix cached
                await lead.wait_turn(spec["index"], spec.get("total", 0))
            async with limit:
                seen = None
                if budget is not None:  # checked when its turn comes, not when it was queued
                    if stop := budget.reached():
                        budget.refused += 1
                        return cancelled(spec, state, stop, cause=BUDGET_CAUSE)
                    seen = budget.seen()
                record = await run_watched(
                    lambda copy_life: copy(spec, copy_life, life), life, watch, limit
                )
                if seen is not None:
                    record["budget_seen"] = seen
        except asyncio.CancelledError:
            if votes is None or spec["id"] not in votes.cancelled:
                raise
            return cancelled(spec, state, votes.reason)
        finally:
            if lead is not None:
                lead.done(spec["index"])
        if budget is not None:
            budget.add(record)
        if votes is not None:
            votes.finished(
                spec["id"], (record.get("vote") or None) if record["status"] == "ok" else None
            )
        return record

    with holding(budget):  # every request of these branches is held against the run's budget first
        return {"branches": list(await asyncio.gather(*(bounded(s) for s in state["branches"])))}


def wave_seats(
    specs: list[BranchSpec],
    takes_n: dict[tuple[str, str], bool],
    arrived: Callable[[list[str]], None] | None = None,
) -> dict[str, Seat]:
    """Branch id -> its seat in a request with `n`: this task's votes grouped by model and
    temperature (a run's votes share their prompt), in requests of at most MAX_CHOICES; a vote alone
    in its group gets none. `arrived`: the vote watch hears which votes came back together, so it
    cancels none of them."""
    groups: dict[tuple[str, float], list[str]] = {}
    for spec in specs:
        if spec["kind"] == "vote":
            groups.setdefault((spec["model"], spec["temperature"]), []).append(spec["id"])
    seats: dict[str, Seat] = {}
    for ids in groups.values():
        for start in range(0, len(ids), MAX_CHOICES):
            chunk = ids[start : start + MAX_CHOICES]
            if len(chunk) > 1:
                request = WaveRequest(chunk, takes_n, arrived)
                seats.update({branch: Seat(request, branch) for branch in chunk})
    return seats


def cancelled(
    spec: BranchSpec, state: WorkShared, why: str, cause: str | None = None
) -> dict[str, Any]:
    """The record of a vote cancelled in flight, or a branch the run's budget did not let start
    (`cause` "budget", `error` the budget's reason): not counted, not asked again, no dead letter.
    """
    life = planned(spec)
    life.move("DISPATCHED")
    life.finish("CANCELLED", why)
    template = _template(spec, state.get("prompts"))
    return BranchRecord(
        **_identity(spec, template),
        model=spec["model"] or None,
        temperature=spec["temperature"],
        status="cancelled",
        state=life.state,
        transitions=life.transitions,
        cause=cause,
        error=why if cause else None,
    ).model_dump()


def work_failed(state: WorkTask, error: NodeError) -> dict[str, Any]:
    """Error handler: every branch of a group that crashed is recorded as failed (and escalated)."""
    message = f"{type(error.error).__name__}: {error.error}"[:500]
    records = []
    for spec in state["branches"]:
        life = planned(spec)
        life.finish("ESCALATED", message)
        typed = state.get("output_schema") is not None
        template = _template(spec, state.get("prompts"), typed)
        records.append(
            BranchRecord(
                **_identity(spec, template, typed),
                model=spec["model"] or None,
                temperature=spec["temperature"],
                status="failed",
                error=message,
                cause="crash",
                state=life.state,
                transitions=life.transitions,
                input=dict(input_of(spec)),
            ).model_dump()
        )
    return {"branches": records}
