"""A run's budget (`max_cost`, `max_tokens`) and the checks that hold it.

See docs/configuration.md#prices-and-budgets and docs/internals/runs.md#budgets.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from parallax.logic.spend import spend_of
from parallax.runtime.request_budget import Purse
from parallax.runtime.services import Services
from parallax.state.records import BudgetSpec, Limits

BUDGET_CAUSE = "budget"
"""The `cause` of a branch that was not started because the run's budget was reached (status
`cancelled`)."""


def limits_of(state: Mapping[str, Any]) -> Limits | None:
    """The run's budget from its input, or None: no budget."""
    limits: Limits = {}
    if state.get("max_cost") is not None:
        limits["max_cost"] = float(state["max_cost"])
    if state.get("max_tokens") is not None:
        limits["max_tokens"] = int(state["max_tokens"])
    return limits or None


def budget_key(state: Mapping[str, Any]) -> str:
    """Whose tally a run's spend goes to: its plan's, when it is a task of one, else its own."""
    return str(state.get("parent_trace") or state["trace_id"])


def reached(limits: Limits, tokens: int, cost: float, unpriced: Iterable[str]) -> str | None:
    """ "budget reached: ..." when the spend is at or past a limit, else None."""
    max_tokens, max_cost = limits.get("max_tokens"), limits.get("max_cost")
    unpriced = sorted(unpriced)
    if max_cost is not None and unpriced:
        return (
            f"budget reached: cost unknown (no price for {', '.join(unpriced)}), so max_cost"
            f" ${max_cost:g} cannot be held ({tokens} tokens spent; set PARALLAX_PRICES)"
        )
    if max_cost is not None and cost >= max_cost:
        return f"budget reached: spent ${cost:.6f} of max_cost ${max_cost:g} ({tokens} tokens)"
    if max_tokens is not None and tokens >= max_tokens:
        return f"budget reached: spent {tokens} of max_tokens {max_tokens} tokens (${cost:.6f})"
    return None


class RunBudget(Purse):
    """The live tally of one run's spend in this process (runtime/request_budget.py), and whether it
    may start another model call."""

    def add(self, record: Mapping[str, Any]) -> None:
        """Count a finished branch (once: a record seen before, or whose requests were counted as
        they returned, is skipped)."""
        ident = record.get("id")
        if ident is not None:
            if ident in self.counted:
                return
            self.counted.add(ident)
        one = spend_of((record,))
        self.add_spend(one["tokens"], one["cost_usd"], one["unpriced"])

    def absorb(self, records: Iterable[Mapping[str, Any]]) -> None:
        for record in records:
            self.add(record)

    def reached(self) -> str | None:
        return reached(self.limits, self.tokens, self.cost, self.unpriced)

    def seen(self) -> dict[str, Any]:
        """What a branch let start is stamped with: when, and what the run had spent then."""
        return {
            "at": round(time.time(), 4),
            "tokens": self.tokens,
            "cost_usd": round(self.cost, 10),
        }

    def spec(self, key: str) -> BudgetSpec:
        return {
            **self.limits,
            "key": key,
            "spent_tokens": self.tokens,
            "spent_cost": self.cost,
            "unpriced": sorted(self.unpriced),
        }


def tally(
    services: Services, key: str, limits: Limits, records: Iterable[Mapping[str, Any]] = ()
) -> RunBudget:
    """The run's live tally (made from `records` when this process has none), with `records`
    counted."""
    found = services.shared(key, lambda: RunBudget(limits), "budget")
    found.absorb(records)
    return found


def tally_of(services: Services, spec: BudgetSpec) -> RunBudget:
    """A fan-out task's tally: the run's, or one made from what the fan-out said was spent."""
    limits: Limits = {}
    if "max_cost" in spec:
        limits["max_cost"] = spec["max_cost"]
    if "max_tokens" in spec:
        limits["max_tokens"] = spec["max_tokens"]
    return services.shared(
        spec["key"],
        lambda: RunBudget(
            limits,
            spec.get("spent_tokens", 0),
            spec.get("spent_cost", 0.0),
            spec.get("unpriced", ()),
        ),
        "budget",
    )


def run_records(state: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every branch a run paid for: its own, and a plan's tasks' (which a plan state keeps under its
    tasks)."""
    return [
        *(state.get("branches") or ()),
        *(b for t in state.get("tasks") or () for b in t.get("branches") or ()),
    ]


def fan_out_spec(services: Services, state: Mapping[str, Any]) -> BudgetSpec | None:
    """What a fan-out passes its tasks (None: the run has no budget)."""
    limits = limits_of(state)
    if limits is None:
        return None
    key = budget_key(state)
    return tally(services, key, limits, run_records(state)).spec(key)


def run_tally(services: Services, state: Mapping[str, Any]) -> RunBudget | None:
    """The run's live tally with everything its state records counted, or None: the run has no
    budget. For a node that makes several calls in a row (a plan's checks and joins): `add` each
    record, ask `reached()` before each.
    """
    limits = limits_of(state)
    return (
        None if limits is None else tally(services, budget_key(state), limits, run_records(state))
    )


def state_reached(state: Mapping[str, Any], services: Services | None = None) -> str | None:
    """Between supersteps (another wave, the judge, the red team): is the run's budget reached, or
    did it refuse a request already (then the run asks nothing more of its own accord)?"""
    limits = limits_of(state)
    if limits is None:
        return None
    if refusals := _refusals(state):
        return refusals[0]
    if services is not None:
        return tally(services, budget_key(state), limits, run_records(state)).reached()
    spent = spend_of(run_records(state))
    return reached(limits, spent["tokens"], spent["cost_usd"] or 0.0, spent["unpriced"])


def _refusals(state: Mapping[str, Any]) -> list[str]:
    """Why each branch (or plan task) the budget did not let start was refused."""
    return [
        str(r.get("error") or r.get("reason") or "budget reached")
        for r in [*run_records(state), *(state.get("tasks") or ())]
        if r.get("cause") == BUDGET_CAUSE
    ]


def stopped(state: Mapping[str, Any]) -> bool:
    """Did the budget stop anything in this run: a branch, candidate or task not started, a wave,
    judge or red team not asked (in a plan: in any of its tasks' runs too)?"""
    return (
        bool(state.get("budget_stop"))
        or bool(_refusals(state))
        or any(
            str(t.get("reason") or "").startswith("budget reached")
            for t in state.get("tasks") or ()
        )
    )


def finish(state: Mapping[str, Any]) -> dict[str, Any]:
    """The run's outcome once the budget stopped it: `needs_review` (a `failed` run stays failed),
    the reason first."""
    if not stopped(state):
        return {}
    spent = spend_of(run_records(state))
    limits = limits_of(state) or {}
    why = str(
        reached(limits, spent["tokens"], spent["cost_usd"] or 0.0, spent["unpriced"])
        or state.get("budget_stop")
        or next(iter(_refusals(state)), "")
        or "budget reached by the plan it is part of"
    )
    if not why.startswith("budget reached"):
        why = f"budget reached: {why}"
    reason = str(state.get("reason") or "")
    status = state.get("status") or "needs_review"
    return {
        "status": "failed" if status == "failed" else "needs_review",
        "reason": (
            reason
            if reason.startswith("budget reached")
            else "; ".join(x for x in (why, reason) if x)
        ),
    }


def graph_tally(services: Services, key: str, state: Mapping[str, Any]) -> RunBudget | None:
    """A learn or loop run's live tally (None: no budget), made from what its state says it spent
    (`spend`, summed by its nodes) when this process has none: every request of the runs,
    reflections and gates it starts is held against it (runtime/request_budget.py `holding`)."""
    limits = limits_of(state)
    if limits is None:
        return None
    spent = state.get("spend") or {}
    return services.shared(
        key,
        lambda: RunBudget(
            limits,
            int(spent.get("tokens", 0)),
            float(spent.get("cost_usd", 0.0)),
            spent.get("unpriced", ()),
        ),
        "budget",
    )


def spent_by(own: Purse) -> dict[str, Any]:
    """What a node's own requests spent (a purse without limits that counted them), as a learn
    state's `spend`."""
    return {"tokens": own.tokens, "cost_usd": round(own.cost, 10), "unpriced": sorted(own.unpriced)}
