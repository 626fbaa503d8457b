"""The route turned into `Send`s: business branches or candidates, plus the safety check.

All start in one superstep and share one call limit (runtime/fan_out_limit.py); `next_wave` sends
each further wave of an adaptive vote.
"""

from __future__ import annotations

from langgraph.runtime import get_runtime
from langgraph.types import Send

from parallax.logic.branch_plans import (
    adaptive,
    branch_specs,
    first_wave,
    request_groups,
    run_metadata,
)
from parallax.logic.budget import fan_out_spec
from parallax.logic.speculation import candidate_specs, check_spec
from parallax.runtime.run_context import context_of, tenant_of
from parallax.runtime.services import new_fan_out, services_of
from parallax.state.context import Context, setting
from parallax.state.records import BranchSpec, CandidateTask, SafetyTask, WorkShared, WorkTask
from parallax.state.solve import SolveState


async def fan_out(state: SolveState) -> list[Send]:
    """Conditional edge after `route`: safety and business branches (a vote: its first wave) start
    together."""
    ctx = context_of(get_runtime())
    if state["mode"] == "speculate":
        return [Send("safety", _safety(state)), *_candidates(state, ctx)]
    specs = branch_specs(state, ctx, first_wave(state, ctx) if state["mode"] == "vote" else None)
    return [
        Send("safety", _safety(state)),
        *_work(state, ctx, specs, earlier=[] if adaptive(state, ctx) else None),
    ]


def _safety(state: SolveState) -> SafetyTask:
    return {"trace_id": state["trace_id"], "text": f"{state.get('question', '')}\n{state['task']}"}


def _candidates(state: SolveState, ctx: Context) -> list[Send]:
    """Speculate: one `candidate` task per candidate, each with its own approach, all at once."""
    check = check_spec(state, ctx)
    shared = {
        "fan_out": new_fan_out(),
        "check": check,
        "tenant": tenant_of(state.get("tenant")),
        "prompts": state.get("prompts") or {},
        "meta": run_metadata(state),
    }
    if (budget := fan_out_spec(services_of(ctx), state)) is not None:
        shared["budget"] = budget
    tasks: list[CandidateTask] = [
        {"candidate": spec, **shared}  # type: ignore[typeddict-item]
        for spec in candidate_specs(state, ctx)
    ]
    return [Send("candidate", task) for task in tasks]


async def next_wave(state: SolveState) -> list[Send]:
    """The next wave of an adaptive vote: `state["next_wave"]` more votes, after the ones asked so
    far."""
    ctx = context_of(get_runtime())
    asked = state.get("votes_asked", 0)
    specs = branch_specs(state, ctx, range(asked, asked + state.get("next_wave", 0)))
    earlier = [
        vote
        for b in state.get("branches", [])
        if b["kind"] == "vote" and b["status"] == "ok" and (vote := b.get("vote"))
    ]
    return _work(state, ctx, specs, earlier)


def _work(
    state: SolveState, ctx: Context, specs: list[BranchSpec], earlier: list[str] | None
) -> list[Send]:
    shared: WorkShared = {
        "fan_out": new_fan_out(),
        "prompts": state.get("prompts") or {},
        "meta": run_metadata(state),
    }
    if state.get("output_schema") is not None:
        shared["output_schema"] = state["output_schema"]
    if earlier is not None:
        shared["vote_watch"] = {
            "earlier": earlier,
            "threshold": setting(ctx.vote_stop_threshold),
            "min_leader": state.get("min_votes") or 0,
        }
    if (budget := fan_out_spec(services_of(ctx), state)) is not None:
        shared["budget"] = budget
    tasks: list[WorkTask] = (
        [{"branches": branches, **shared} for branches in request_groups(specs)] if specs else []
    )
    return [Send("work", task) for task in tasks]
