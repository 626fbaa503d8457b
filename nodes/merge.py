"""Branch outputs merged into one validated answer, with explicit degrade paths.

Every record is validated before use; what was checked is reported in `verification`
(docs/how-it-works.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.branch_kinds import KINDS
from parallax.logic.branch_plans import adaptive, waves_of
from parallax.logic.budget import BUDGET_CAUSE, state_reached
from parallax.logic.plain_outcome import Ballot, PlainOutcome
from parallax.logic.routing import votes_of
from parallax.logic.run_status import final_status
from parallax.logic.stopping import decide_units
from parallax.logic.typed_outcome import TypedOutcome, vote_tally
from parallax.logic.vote_pricing import remember_vote, vote_model
from parallax.runtime.run_context import context_of
from parallax.runtime.services import services_of
from parallax.state.context import Context, setting
from parallax.state.payloads import BranchRecord
from parallax.state.solve import SolveState
from parallax.state.vocabulary import BUSINESS, ROUTE_KIND


@dataclass(frozen=True)
class Counted:
    """A run's business branches as the merge counts them."""

    business: list[BranchRecord]
    """Asked and not cancelled."""
    blank: set[str]
    """Votes whose answer reduces to no value ("...", "**"): counted neither for '' nor as valid."""
    ok: list[BranchRecord]
    failed: list[str]

    @classmethod
    def of(cls, records: list[BranchRecord]) -> Counted:
        business = [r for r in records if r.kind in BUSINESS and r.status != "cancelled"]
        blank = {r.id for r in business if r.status == "ok" and r.kind == "vote" and r.vote == ""}
        return cls(
            business,
            blank,
            [r for r in business if r.status == "ok" and r.id not in blank],
            [r.id for r in business if r.status != "ok"],
        )

    @property
    def partial(self) -> str:
        """What of the business branches did not count, said beside the answer."""
        n = len(self.business)
        return "; ".join(
            x
            for x in (
                f"{len(self.failed)} of {n} branches failed" if self.failed else "",
                f"{len(self.blank)} of {n} votes gave no value to count" if self.blank else "",
            )
            if x
        )


async def merge(state: SolveState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Settle the business branches into one answer by their kind's rules (logic/branch_kinds.py),
    or send an adaptive vote's next wave."""
    if state["mode"] == "speculate":
        return {}  # the candidates are verified and picked by nodes/pick.py
    ctx = context_of(runtime)
    records = [BranchRecord.model_validate(r) for r in state.get("branches", [])]
    counted = Counted.of(records)
    voting = state["mode"] == "vote"
    asked: dict[str, Any] = {"votes_asked": len(counted.business), "next_wave": 0} if voting else {}
    unsettled = _nothing_to_settle(records, counted, asked)
    if unsettled is not None:
        return unsettled
    schema = state.get("output_schema")
    ballot = Ballot(
        counted.ok,
        asked=len(counted.business),
        min_votes=state.get("min_votes"),
        slices=state.get("slices") or [],
        slice_pages=state.get("slice_pages") or [],
        pages=state.get("pages") or [],
    )
    if (
        schema is not None and voting
    ):  # a vote on objects is tallied once: what it waits on, what it settles
        ballot = replace(
            ballot, fields=vote_tally(schema, ballot.ok, ballot.asked, ballot.min_votes)
        )
    next_wave, stop = _waves(state, ctx, ballot, asked)
    if next_wave is not None:  # another wave (graphs/solve.py sends it), then this merge again
        return {**asked, "next_wave": next_wave}
    if voting:  # its counts and reply sizes price the plans of the model's next votes
        remember_vote(services_of(ctx), vote_model(ctx), state.get("branches") or [])
    rules = KINDS[ROUTE_KIND[state["mode"]]]
    settled = (
        _typed(rules.settle_typed(ballot, schema), records, setting(ctx.ok_confidence))
        if schema is not None
        else _plain(rules.settle(ballot), records, setting(ctx.ok_confidence))
    )
    reason = "; ".join(x for x in (settled.pop("reason"), counted.partial) if x)
    return {
        **settled,
        "failed_branches": counted.failed,
        "reason": reason,
        **asked,
        **({"stop_reason": stop} if asked else {}),
    }


def _nothing_to_settle(
    records: list[BranchRecord], counted: Counted, asked: dict[str, Any]
) -> dict[str, Any] | None:
    """A run with no valid business branch: the budget let none ask, or all of them failed."""
    refused = [
        r.error for r in records if r.kind in BUSINESS and r.cause == BUDGET_CAUSE and r.error
    ]
    if (
        not counted.business and refused
    ):  # the run's budget let none ask: nothing failed, there is only nothing to show
        return {
            "status": "needs_review",
            "answer": "",
            "data": None,
            "provenance": [],
            "confidence": 0.0,
            "vote_counts": {},
            "failed_branches": [],
            **asked,
            "consensus": False,
            "reason": refused[0],
            **({"stop_reason": refused[0]} if asked else {}),
        }
    if counted.ok:
        return None
    errors = "; ".join(
        sorted(
            {
                r.error or ("no value to count" if r.id in counted.blank else r.status)
                for r in counted.business
            }
        )
    )[:500]
    return {
        "status": "failed",
        "answer": "",
        "data": None,
        "provenance": [],
        "confidence": 0.0,
        "vote_counts": {},
        "failed_branches": counted.failed,
        **asked,
        "stop_reason": "every vote asked failed" if asked else "",
        "consensus": False,
        "reason": f"all {len(counted.business)} branches failed: {errors}",
    }


def _waves(
    state: SolveState, ctx: Context, ballot: Ballot, asked: dict[str, Any]
) -> tuple[int | None, str]:
    """(votes of the next wave, else None; why the vote asks no more). An adaptive vote that has not
    settled asks another wave unless the run's budget withholds it (then `asked` keeps its stop)."""
    if not adaptive(state, ctx):
        return None, "all of them: early stopping off"
    fields = ballot.fields
    units = (
        fields.unit_counts
        if fields is not None
        else [list(Counter(r.vote for r in ballot.ok).values())]
    )
    first, least = waves_of(state, ctx)
    decision = decide_units(
        units,
        ballot.asked,
        votes_of(state),
        threshold=setting(ctx.vote_stop_threshold),
        first_wave=first,
        min_wave=least,
        min_leader=state.get("min_votes") or 0,
    )
    withheld = None if decision.stop else state_reached(state, services_of(ctx))
    if not decision.stop and not withheld:
        return decision.next_wave, ""
    if withheld is None:
        return None, decision.reason
    asked["budget_stop"] = stop = f"{withheld}: the next wave was not asked"
    return None, stop


def _plain(
    outcome: PlainOutcome, records: list[BranchRecord], ok_confidence: float
) -> dict[str, Any]:
    """A run without an output schema: the answer its kind settled on (logic/plain_outcome.py)."""
    status, why = final_status(records, outcome.settled, outcome.confidence, ok_confidence)
    return {
        "answer": outcome.answer,
        "vote_counts": outcome.votes,
        "confidence": round(outcome.confidence, 3),
        "consensus": outcome.settled,
        "status": status,
        "verification": outcome.verification,
        "reason": "; ".join(x for x in (why, outcome.note) if x),
    }


def _typed(
    outcome: TypedOutcome, records: list[BranchRecord], ok_confidence: float
) -> dict[str, Any]:
    """A run with an output schema: the object its kind settled on (logic/typed_outcome.py)."""
    status, why = final_status(records, outcome.settled, outcome.confidence, ok_confidence)
    return {
        "answer": outcome.answer,
        "data": outcome.data,
        "provenance": outcome.provenance,
        "vote_counts": {},
        "confidence": outcome.confidence,
        "consensus": outcome.settled,
        "status": status,
        "verification": outcome.verification,
        "reason": "; ".join(x for x in (why, *outcome.notes) if x),
    }
