"""One arbitration call when the votes do not reach the threshold.

The judge breaks ties between the leading answers; it does not vote (docs/how-it-works.md).
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.branch_plans import run_metadata
from parallax.logic.budget import run_tally, state_reached
from parallax.logic.run_status import final_status
from parallax.logic.vote import final_value, quorum_shortfall
from parallax.prompts.solve import judge_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of
from parallax.runtime.services import services_of
from parallax.state.context import Context, setting
from parallax.state.payloads import Answer, BranchRecord, JudgeDecision, judge_reply
from parallax.state.solve import SolveState


async def judge(state: SolveState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    records = [BranchRecord.model_validate(r) for r in state["branches"]]
    originals = {
        r.vote: Answer.model_validate(r.output).answer.strip()
        for r in records
        if r.kind == "vote" and r.status == "ok"
    }
    candidates = [originals[v] for v in state["vote_counts"]]
    votes = [r for r in records if r.kind == "vote" and r.status != "cancelled"]
    unjudged = _not_judged(state, ctx, votes, candidates)
    if unjudged is not None:
        return unjudged
    template = (state.get("prompts") or {}).get("judge")
    identity = {
        "id": f"judge-{uuid.uuid4().hex[:8]}",
        "parent_id": state["trace_id"],
        "kind": "judge",
        "prompt": {"name": "judge", "version": template.get("version", 0) if template else 0},
    }
    messages = judge_messages(
        state["task"], state.get("question", ""), candidates, version=template
    )
    with holding(run_tally(services_of(ctx), state)):
        record, decision = await call_branch(
            identity,
            messages,
            judge_reply(tuple(candidates)),
            ctx,
            model=ctx.reviewer_model,
            temperature=0.0,
            run_metadata=dict(run_metadata(state)),
        )
    if decision is None:
        return {
            "branches": [record.model_dump()],
            "status": "needs_review",
            "reason": f"{state.get('reason', '')}; the judge failed: {record.error}".strip("; "),
        }
    return _decided(state, ctx, records, votes, originals, record, decision)


def _not_judged(
    state: SolveState, ctx: Context, votes: list[BranchRecord], candidates: list[str]
) -> dict[str, Any] | None:
    """The update that leaves the tie for review without a judge: the budget is reached, the
    votes missed their quorum, or there is one candidate; None when the judge is asked."""
    unsettled = ""
    if stop := state_reached(state, services_of(ctx)):
        if str(state.get("reason", "")).startswith("budget reached"):  # the merge said so already
            return {"status": "needs_review", "budget_stop": stop}
        unsettled = f"{stop}: the judge was not asked"
    valid = sum(
        r.status == "ok" and r.vote != "" for r in votes
    )  # an answer that reduces to no value is no vote
    unsettled = unsettled or quorum_shortfall(valid, len(votes), state.get("min_votes"))
    if not unsettled and len(candidates) < 2:
        unsettled = "a lone candidate cannot be judged into a result"
    if not unsettled:
        return None
    reason = state.get("reason", "")
    return {
        "status": "needs_review",
        "reason": reason if unsettled in reason else f"{reason}; {unsettled}".strip("; "),
        **({"budget_stop": unsettled} if unsettled.startswith("budget reached") else {}),
    }


def _decided(
    state: SolveState,
    ctx: Context,
    records: list[BranchRecord],
    votes: list[BranchRecord],
    originals: dict[str | None, str],
    record: BranchRecord,
    decision: JudgeDecision,
) -> dict[str, Any]:
    """The judge's pick as the run's answer; needs review when it picked no candidate or a
    minority one."""
    counts = state["vote_counts"]
    choice = final_value(decision.choice)
    if choice not in counts:
        return {
            "branches": [record.model_dump()],
            "status": "needs_review",
            "reason": (
                f"{state.get('reason', '')}; the judge did not pick a candidate: it replied "
                f"{decision.choice[:60]!r}, which is none of them".strip("; ")
            ),
        }
    leader = max(counts, key=lambda v: counts[v])
    if counts[choice] < counts[leader]:
        return {
            "branches": [record.model_dump()],
            "status": "needs_review",
            "answer": originals[leader],
            "reason": (
                f"{state.get('reason', '')}; the judge chose {originals[choice]!r}, which"
                f" {counts[choice]} vote(s) gave against {counts[leader]} for"
                f" {originals[leader]!r}: a minority pick is no result".strip("; ")
            ),
        }
    confidence = round(
        counts[choice] / max(1, sum(r.status == "ok" and r.vote != "" for r in votes)), 3
    )
    status, why = final_status(records, True, confidence, setting(ctx.ok_confidence))
    said = decision.reason.strip()  # the judge's own words, labelled so (an empty one is left out)
    broke = (
        f"the judge broke the tie for {originals[choice]!r}"
        + (f'; the judge\'s reason: "{said}"' if said else "")
    )[:300]
    return {
        "branches": [record.model_dump()],
        "answer": originals[choice],
        "consensus": True,
        "status": status,
        "confidence": confidence,
        "reason": "; ".join(x for x in (why, broke) if x),
    }
