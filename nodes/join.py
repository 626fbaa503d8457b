"""The joiner: replan, or finish — resolve board conflicts, synthesise, apply the rules, set the status.

It replans when a required task did not finish and a replan is left (`max_replans`,
default 1; the planner stops at once on a replan equal to the plan before). Otherwise it
works with what finished: board keys in conflict get one judge call each (a choice that is
not one of the candidates leaves the conflict for review), the output tasks' results are
synthesised (logic/synthesis.py; a `reduce` folds them pairwise with one combine call per
pair), and logic/plan_outcome.py decides `ok` / `needs_review` / `failed` with reasons.
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.budget import run_tally
from parallax.logic.plan_outcome import plan_status, should_replan
from parallax.logic.synthesis import synthesise
from parallax.logic.vote import normalize_answer
from parallax.prompts.plan import combine_messages
from parallax.prompts.solve import judge_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of
from parallax.runtime.services import services_of
from parallax.state.context import Context
from parallax.state.payloads import Answer, judge_reply
from parallax.state.plan import FINISHED, Plan, PlanState
from parallax.state.vocabulary import BUSINESS

WORKERS = (*BUSINESS, "edit")
"""Kinds of branch that do a task's work: the plan names those that failed."""


async def join(state: PlanState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    plan = Plan.model_validate(state["plan"])
    records = {r["id"]: r for r in state.get("tasks", []) if r["round"] == state["round"]}
    budget = run_tally(services_of(ctx), state)
    stops: list[str] = []
    replan = should_replan(plan, records, state.get("max_replans", 1) - state["round"], state.get("stop", ""))
    if replan and budget is not None and (stop := budget.reached()):
        stops.append(f"{stop}: no replan ({replan})")
    elif replan:
        return {"decision": "replan", "reason": replan}
    calls: list[dict[str, Any]] = []

    def refused(what: str) -> bool:
        """The budget is reached: the call for `what` is not made (and the run says so)."""
        if budget is None:
            return False
        budget.absorb(calls)
        stop = budget.reached()
        if stop:
            stops.append(f"{stop}: {what} was not asked")
        return stop is not None

    def identity(kind: str) -> dict[str, Any]:
        return {"id": f"{kind}-{uuid.uuid4().hex[:8]}", "parent_id": state["trace_id"], "kind": kind}

    async def combine(first: str, second: str) -> str | None:
        if refused("a combine call"):
            return None
        with holding(budget):
            record, reply = await call_branch(identity("combine"), combine_messages(state["request"], first, second),
                                              Answer, ctx, model=ctx.reviewer_model, temperature=0.0)
        calls.append(record.model_dump())
        return None if reply is None else reply.answer

    board_update, unresolved = {}, []
    for key, entry in (state.get("board") or {}).items():
        if not entry.get("conflict") or entry.get("resolved"):
            continue
        candidates = [str(e["value"]) for e in entry["entries"]]
        if refused(f"the judge of board key {key}"):
            unresolved.append(key)
            continue
        asked = judge_messages(state["request"], f"board key {key}", candidates)
        with holding(budget):
            record, decision = await call_branch(identity("judge"), asked, judge_reply(tuple(dict.fromkeys(candidates))),
                                                 ctx, model=ctx.reviewer_model, temperature=0.0)
        calls.append(record.model_dump())
        chosen = [c for c in candidates if decision and normalize_answer(c) == normalize_answer(decision.choice)]
        if chosen and decision is not None:
            board_update[key] = {"entries": [], "resolved": {"value": chosen[0], "by": record.id, "reason": decision.reason}}
        else:
            unresolved.append(key)
    results = {t.id: records[t.id].get("output") if records.get(t.id, {}).get("status") in FINISHED else None
               for t in plan.tasks}
    synthesis = await synthesise(plan, results, combine)
    verification = {**(state.get("verification") or {}),
                    "rules": {"required_missing": [t.id for t in plan.tasks if not t.optional
                                                   and records.get(t.id, {}).get("status") not in FINISHED],
                              "synthesis": plan.synthesis, "settled": synthesis.settled, "vote": synthesis.quorum,
                              "board_conflicts_unresolved": unresolved}}
    status, confidence, reasons = plan_status(plan, records, synthesis, verification, unresolved)
    if state.get("stop"):
        reasons.append(state["stop"])
    if stops:
        reasons.insert(0, stops[0])
    return {"decision": "finish", "answer": synthesis.answer, "status": status, "confidence": confidence,
            "vote_counts": synthesis.votes, "reason": "; ".join(reasons)[:1000], "verification": verification,
            "branches": calls, "board": board_update, **({"budget_stop": stops[0]} if stops else {}),
            "failed_branches": [b["id"] for r in records.values() for b in r.get("branches", [])
                                if b.get("kind") in WORKERS and b.get("status") != "ok"]}
