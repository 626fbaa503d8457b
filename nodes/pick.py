"""Speculate mode's verifier: pick one candidate and say why each other lost.

See docs/how-it-works.md#speculate-several-approaches-at-once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

from langgraph.runtime import Runtime

from parallax.logic.branch_plans import run_metadata
from parallax.logic.budget import BUDGET_CAUSE, run_tally, state_reached
from parallax.logic.run_status import final_status
from parallax.logic.speculation import (
    UNCLEAR_CONFIDENCE,
    Pick,
    match_result,
    pairs,
    pick_checked,
    tournament_pick,
)
from parallax.prompts.solve import compare_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of
from parallax.runtime.services import services_of
from parallax.state.context import Context, setting
from parallax.state.payloads import BranchRecord, CandidateAnswer, Comparison
from parallax.state.records import BranchRecordData, CheckResult, Speculation, branch_data
from parallax.state.solve import SolveState
from parallax.state.trace_record import CandidateSummary, Match, SpeculationReport


async def _verdict(
    state: SolveState,
    ctx: Context,
    first: BranchRecordData,
    second: BranchRecordData,
    records: list[BranchRecordData],
) -> str | None:
    """One judge call with `first` shown as A: the letter it chose (None when the call failed)."""
    template = (state.get("prompts") or {}).get("compare")
    identity = {
        "id": f"compare-{first['id'][10:]}-{second['id'][10:]}",
        "parent_id": state["trace_id"],
        "kind": "compare",
        "prompt": {"name": "compare", "version": template.get("version", 0) if template else 0},
    }
    messages = compare_messages(
        state["task"], state.get("question", ""), _answer(first), _answer(second), version=template
    )
    with holding(run_tally(services_of(ctx), state)):
        record, decision = await call_branch(
            identity,
            messages,
            Comparison,
            ctx,
            model=ctx.reviewer_model,
            temperature=0.0,
            run_metadata=dict(run_metadata(state)),
        )
    records.append(branch_data(record))
    return decision.better if decision is not None else None


def _answer(record: BranchRecordData) -> str:
    return CandidateAnswer.model_validate(record["output"]).answer.strip()


async def _tournament(
    state: SolveState, ctx: Context, ok: list[BranchRecordData], records: list[BranchRecordData]
) -> Pick:
    by_id = {c["id"]: c for c in ok}
    ids = [c["id"] for c in ok]
    matches: list[Match] = []
    while len(ids) > 1:
        if stop := state_reached(
            {**state, "branches": [*state.get("branches", []), *records]}, services_of(ctx)
        ):
            why = {i: f"not compared: {stop}" for i in ids[1:]}
            return Pick(
                ids[0],
                "needs_review",
                UNCLEAR_CONFIDENCE,
                f"{stop}; {ids[0]} was not compared with {len(ids) - 1} other candidate(s)",
                why,
                matches,
            )
        matched, bye = pairs(ids)
        verdicts = await asyncio.gather(
            *(
                asyncio.gather(
                    _verdict(state, ctx, by_id[a], by_id[b], records),
                    _verdict(state, ctx, by_id[b], by_id[a], records),
                )
                for a, b in matched
            )
        )
        round_ = [
            match_result(a, b, one, other)
            for (a, b), (one, other) in zip(matched, verdicts, strict=True)
        ]
        matches += round_
        ids = [m["winner"] for m in round_] + ([bye] if bye else [])
    return tournament_pick(ids, matches)


async def pick(state: SolveState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    records = [BranchRecord.model_validate(r) for r in state.get("branches", [])]
    candidates: list[BranchRecordData] = sorted(
        (r.copy() for r in state.get("branches", []) if r["kind"] == "candidate"),
        key=lambda r: (r.get("speculation") or {}).get("index", 0),
    )
    checked = bool(state.get("check"))
    judged: list[BranchRecordData] = []
    choice = await _choose(state, ctx, candidates, checked, judged)
    failed = [c["id"] for c in candidates if c["status"] not in ("ok", "cancelled")]
    if choice.winner is None:
        return _no_winner(choice, candidates, failed, judged)
    winner = next(c for c in candidates if c["id"] == choice.winner)
    rewritten = [_with_result(c, choice) for c in candidates]
    status, why = final_status(
        records, choice.status == "ok", choice.confidence, setting(ctx.ok_confidence)
    )
    partial = f"{len(failed)} of {len(candidates)} candidates failed" if failed else ""
    report: SpeculationReport = {
        "by": "check" if checked else "judge",
        "winner": choice.winner,
        "status": choice.status,
        "reason": choice.reason,
        "matches": choice.matches,
        "candidates": [_summary(c) for c in rewritten],
    }
    stopped = choice.reason.startswith("budget reached")
    return {
        **({"budget_stop": choice.reason} if stopped else {}),
        "answer": _answer(winner),
        "status": status,
        "confidence": choice.confidence,
        "consensus": status == "ok",
        "failed_branches": failed,
        "vote_counts": {},
        "branches": [*rewritten, *judged],
        "verification": {"speculation": report},
        "reason": "; ".join(x for x in (why, choice.reason, partial) if x),
    }


async def _choose(
    state: SolveState,
    ctx: Context,
    candidates: list[BranchRecordData],
    checked: bool,
    judged: list[BranchRecordData],
) -> Pick:
    """The first candidate that passed its check, else the judges' tournament among those that
    answered (their records added to `judged`); no winner when none answered."""
    ok = [c for c in candidates if c["status"] == "ok"]
    if checked:
        return pick_checked(candidates)
    if ok:
        return await _tournament(state, ctx, ok, judged)
    return Pick(None, "failed", 0.0, "")


def _no_winner(
    choice: Pick,
    candidates: list[BranchRecordData],
    failed: list[str],
    judged: list[BranchRecordData],
) -> dict[str, Any]:
    """The run's end without a winner: needs review when the budget let none ask, else failed
    with the errors."""
    refused = [
        str(c.get("error")) for c in candidates if c.get("cause") == BUDGET_CAUSE and c.get("error")
    ]
    if refused and not failed:  # the budget let none ask: nothing failed, nothing to show
        return {
            "status": "needs_review",
            "answer": "",
            "confidence": 0.0,
            "failed_branches": [],
            "vote_counts": {},
            "consensus": False,
            "branches": judged,
            "reason": refused[0],
        }
    errors = "; ".join(
        sorted({c.get("error") or c["status"] for c in candidates if c["status"] != "ok"})
    )[:500]
    return {
        "status": "failed",
        "answer": "",
        "confidence": 0.0,
        "failed_branches": failed,
        "vote_counts": {},
        "consensus": False,
        "branches": judged,
        "reason": choice.reason or f"all {len(candidates)} candidates failed: {errors}",
    }


def _with_result(record: BranchRecordData, choice: Pick) -> BranchRecordData:
    spec: Speculation = {**(record.get("speculation") or {})}
    if record["id"] == choice.winner:
        spec["result"], spec["why"] = "won", ""
    else:
        spec["result"] = "cancelled" if spec.get("result") == "cancelled" else "lost"
        spec["why"] = choice.why_lost.get(record["id"], spec.get("why") or "")
    return {**record, "speculation": spec}


def _summary(record: BranchRecordData) -> CandidateSummary:
    spec: Speculation = record.get("speculation") or {}
    check: CheckResult = spec.get("check") or {}
    summary: CandidateSummary = {
        "id": record["id"],
        "approach": spec.get("approach"),
        "temperature": spec.get("temperature"),
        "status": record["status"],
        "result": spec.get("result"),
        "why": spec.get("why", ""),
        "check": _shown_check(check),
    }
    if spec.get("refused"):
        summary["refused"] = spec["refused"]
    if spec.get("reused"):
        summary["reused"] = True
    return summary


_SHOWN_CHECK = ("passed", "exit", "passed_tests", "failed_tests", "timed_out", "seconds", "sandbox")


def _shown_check(check: Mapping[str, object]) -> CheckResult | None:
    """What the verification shows of a candidate's check: its figures, not its output."""
    return cast(CheckResult, {k: check[k] for k in _SHOWN_CHECK if k in check}) or None
