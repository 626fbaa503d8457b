"""Store the run's trace and dead-letter its escalated branches.

See docs/internals/runs.md#the-trace.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, cast

from langgraph.config import get_config
from langgraph.runtime import Runtime

from parallax.logic.budget import finish, run_records
from parallax.logic.run_record import (
    branch_place,
    kept_prompts,
    outcome,
    token_totals,
    used_subjects,
)
from parallax.logic.spend import spend_of
from parallax.runtime.model_note import model_note
from parallax.runtime.run_context import context_of, tenant_of
from parallax.runtime.storage.trace_store import TraceOwner, TraceStore, dead_letter
from parallax.runtime.telemetry import TRACE_CONTEXT, export_later, parent_from
from parallax.runtime.timestamps import now_iso
from parallax.state.context import Context, setting
from parallax.state.plan import PlanState
from parallax.state.solve import SolveState
from parallax.state.trace_record import TraceBranch, TraceRecord, TraceTask
from parallax.state.vocabulary import BUSINESS

PREVIEW_CHARS = 200


def trace_of(state: SolveState, prompt_chars: int) -> TraceRecord:
    """What is kept of a run. Votes are a list of {answer, count}: redaction rewrites values, never
    dict keys, and an answer can hold personal data. `prompt_chars`: the most prompt text it keeps
    (all or none).
    """
    trace = _solve_trace(state, prompt_chars)
    plan_run: Mapping[str, Any] = state  # the plan graph runs this node on its PlanState too
    if plan_run.get("plan"):
        tasks = plan_run.get("tasks", [])
        trace["plan"], trace["plans"] = plan_run["plan"], plan_run.get("plans", [])
        trace["verification"] = state.get("verification", {})
        trace["tasks"] = [
            cast(
                TraceTask,
                {k: v for k, v in t.items() if k != "branches"}
                | {"branch_ids": [b["id"] for b in t.get("branches", [])]},
            )
            for t in tasks
        ]
        trace["branches"] += [
            cast(
                TraceBranch,
                {
                    **{k: v for k, v in b.items() if k != "input"},
                    "task": t["id"],
                    "round": t["round"],
                },
            )
            for t in tasks
            for b in t.get("branches", [])
        ]
    trace["tokens"] = token_totals(trace["branches"])
    return trace


def _solve_trace(state: SolveState, prompt_chars: int) -> TraceRecord:
    prompts, keys, omitted = kept_prompts(state, prompt_chars)
    started = state.get("started_at")
    return cast(
        TraceRecord,
        {
            "trace_id": state["trace_id"],
            "tenant": tenant_of(state.get("tenant")),
            "created_at": now_iso(),
            "task_preview": state["task"][:PREVIEW_CHARS],
            "task_chars": len(state["task"]),
            # the whole task, up to the prompts' limit: what `learn --from-traces` reflects on and
            # replays
            **(
                {"task": state["task"]}
                if PREVIEW_CHARS < len(state["task"]) <= prompt_chars
                else {}
            ),
            # a chat follow-up: what the person wrote (task is the condensed one the branches were
            # given)
            **(
                {"follow_up": {k: state["follow_up"][k] for k in ("asked", "earlier_turns")}}
                if state.get("follow_up")
                else {}
            ),
            "question": state.get("question", ""),
            "mode": state.get("mode"),
            "status": state.get("status"),
            "answer": state.get("answer", ""),
            "reason": state.get("reason", ""),
            "votes": [
                {"answer": answer, "count": count}
                for answer, count in state.get("vote_counts", {}).items()
            ],
            **(
                {
                    "output_schema": state["output_schema"],
                    "data": state.get("data"),
                    "provenance": state.get("provenance", []),
                    "verification": state.get("verification", {}),
                }
                if state.get("output_schema") is not None
                else {}
            ),
            **(
                {"verification": state.get("verification", {})}
                if state.get("mode") == "speculate"
                else {}
            ),
            "confidence": state.get("confidence"),
            "failed_branches": state.get("failed_branches", []),
            "objection": state.get("objection", ""),
            "playbook": state.get("playbook", "default"),
            "playbook_version": state.get("playbook_version", 0),
            "thread_id": state.get("thread_key"),
            "duration_ms": round((time.time() - started) * 1000, 1) if started else None,
            "served": used_subjects(state),
            **outcome(state),
            "feedback": [],
            **({"spend": state["spend"]} if "spend" in state else {}),
            **({"vote_plan": state["vote_plan"]} if state.get("vote_plan") else {}),
            **({k: state[k] for k in ("max_cost", "max_tokens") if state.get(k) is not None}),
            "prompts": prompts,
            **({"prompts_omitted": omitted} if omitted else {}),
            "branches": [
                {
                    **{k: v for k, v in b.items() if k != "input"},
                    **({"prompt_key": keys[branch_place(b)]} if branch_place(b) in keys else {}),
                }
                for b in state.get("branches", [])
            ],
        },
    )


async def record_trace(state: SolveState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Settle what the run spent (and whether its budget stopped it: logic/budget.py), then keep its
    trace."""
    update: dict[str, Any] = {
        **finish(state),
        "spend": spend_of(run_records(state)),
        "note": model_note(context_of(runtime)),
    }
    state = cast(SolveState, {**state, **update})
    if runtime.store is None:
        return update
    tenant, parent = tenant_of(state.get("tenant")), state.get("parent_trace")
    traces = TraceStore(runtime.store, tenant)
    owner: TraceOwner
    if parent:  # part of a plan run: its dead letters name the plan's trace, which is stored there
        owner = {"trace_id": parent, "tenant": tenant}
    else:
        owner = trace = trace_of(state, setting(context_of(runtime).trace_prompt_chars))
        await traces.put_trace(trace)
        # the stored trace as OpenTelemetry spans, when the OTEL_* variables ask for them
        # (runtime/telemetry.py); a served run's W3C trace context (server/trace_context.py) makes
        # it a child of the caller's span
        export_later(
            trace, parent_from((get_config().get("configurable") or {}).get(TRACE_CONTEXT))
        )
    for record in state.get("branches", []):
        if (
            record.get("state") == "ESCALATED"
            and record["kind"] in BUSINESS
            and record.get("input")
        ):
            await traces.put_dead_letter(dead_letter(record, owner))
    return update


async def record_plan_trace(state: PlanState, runtime: Runtime[Context]) -> dict[str, Any]:
    """`record_trace` in the plan graph: a plan run's state holds every key the trace reads (what
    only a solve run has reads as absent), and its plan keys are read through a Mapping
    (`trace_of`)."""
    return await record_trace(cast(SolveState, state), runtime)
