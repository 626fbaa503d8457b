"""Plan mode's joiner: replan, or finish (board conflicts, synthesis, rules, status).

See docs/plan.md (join) and docs/internals/plans.md#finishing.
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.budget import RunBudget, run_tally
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


class _Calls:
    """The joiner's own model calls (a judge per board conflict, the synthesis' combines), each
    left unasked once the run's budget is reached (`stops` says so)."""

    def __init__(self, state: PlanState, ctx: Context, budget: RunBudget | None) -> None:
        self.state, self.ctx, self.budget = state, ctx, budget
        self.calls: list[dict[str, Any]] = []
        self.stops: list[str] = []

    def refused(self, what: str) -> bool:
        """The budget is reached: the call for `what` is not made (and the run says so)."""
        if self.budget is None:
            return False
        self.budget.absorb(self.calls)
        stop = self.budget.reached()
        if stop:
            self.stops.append(f"{stop}: {what} was not asked")
        return stop is not None

    def identity(self, kind: str) -> dict[str, Any]:
        return {
            "id": f"{kind}-{uuid.uuid4().hex[:8]}",
            "parent_id": self.state["trace_id"],
            "kind": kind,
        }

    async def combine(self, first: str, second: str) -> str | None:
        if self.refused("a combine call"):
            return None
        ctx = self.ctx
        with holding(self.budget):
            record, reply = await call_branch(
                self.identity("combine"),
                combine_messages(self.state["request"], first, second),
                Answer,
                ctx,
                model=ctx.reviewer_model,
                temperature=0.0,
            )
        self.calls.append(record.model_dump())
        return None if reply is None else reply.answer

    async def judge(self, key: str, entry: dict[str, Any]) -> dict[str, Any] | None:
        """The board key's conflict resolved by a judge ({value, by, reason}); None when it stays
        unresolved."""
        candidates = [str(e["value"]) for e in entry["entries"]]
        if self.refused(f"the judge of board key {key}"):
            return None
        asked = judge_messages(self.state["request"], f"board key {key}", candidates)
        ctx = self.ctx
        with holding(self.budget):
            record, decision = await call_branch(
                self.identity("judge"),
                asked,
                judge_reply(tuple(dict.fromkeys(candidates))),
                ctx,
                model=ctx.reviewer_model,
                temperature=0.0,
            )
        self.calls.append(record.model_dump())
        chosen = [
            c
            for c in candidates
            if decision and normalize_answer(c) == normalize_answer(decision.choice)
        ]
        if chosen and decision is not None:
            return {"value": chosen[0], "by": record.id, "reason": decision.reason}
        return None


async def _resolve_board(calls: _Calls, board: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the board's update: each conflict a judge resolved, the keys still in conflict)."""
    update, unresolved = {}, []
    for key, entry in board.items():
        if not entry.get("conflict") or entry.get("resolved"):
            continue
        resolved = await calls.judge(key, entry)
        if resolved is None:
            unresolved.append(key)
        else:
            update[key] = {"entries": [], "resolved": resolved}
    return update, unresolved


def _failed_branches(records: dict[int, dict[str, Any]]) -> list[str]:
    return [
        b["id"]
        for r in records.values()
        for b in r.get("branches", [])
        if b.get("kind") in WORKERS and b.get("status") != "ok"
    ]


async def join(state: PlanState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    plan = Plan.model_validate(state["plan"])
    records = {r["id"]: r for r in state.get("tasks", []) if r["round"] == state["round"]}
    budget = run_tally(services_of(ctx), state)
    calls = _Calls(state, ctx, budget)
    replan = should_replan(
        plan, records, state.get("max_replans", 1) - state["round"], state.get("stop", "")
    )
    if replan and budget is not None and (stop := budget.reached()):
        calls.stops.append(f"{stop}: no replan ({replan})")
    elif replan:
        return {"decision": "replan", "reason": replan}
    board_update, unresolved = await _resolve_board(calls, state.get("board") or {})
    results = {
        t.id: (
            records[t.id].get("output") if records.get(t.id, {}).get("status") in FINISHED else None
        )
        for t in plan.tasks
    }
    synthesis = await synthesise(plan, results, calls.combine)
    verification = {
        **(state.get("verification") or {}),
        "rules": {
            "required_missing": [
                t.id
                for t in plan.tasks
                if not t.optional and records.get(t.id, {}).get("status") not in FINISHED
            ],
            "synthesis": plan.synthesis,
            "settled": synthesis.settled,
            "vote": synthesis.quorum,
            "board_conflicts_unresolved": unresolved,
        },
    }
    status, confidence, reasons = plan_status(plan, records, synthesis, verification, unresolved)
    if state.get("stop"):
        reasons.append(state["stop"])
    stops = calls.stops
    if stops:
        reasons.insert(0, stops[0])
    return {
        "decision": "finish",
        "answer": synthesis.answer,
        "status": status,
        "confidence": confidence,
        "vote_counts": synthesis.votes,
        "reason": "; ".join(reasons)[:1000],
        "verification": verification,
        "branches": calls.calls,
        "board": board_update,
        **({"budget_stop": stops[0]} if stops else {}),
        "failed_branches": _failed_branches(records),
    }
