"""Input and output of the `loop` graph: one round of learning from stored runs, gated and released.

The output is the round record that `parallax loop status` lists.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import Field, with_config
from typing_extensions import TypedDict

from parallax.state.inputs import (
    CALLER,
    CanaryShare,
    CostBudget,
    ErrorRate,
    LeaseSeconds,
    Margin,
    Name,
    Runs,
    Since,
    TokenBudget,
)
from parallax.state.learn import MAX_BATCH


@with_config(CALLER)
class LoopInput(TypedDict):
    """What a caller (or the loop's cron) sends: each field with its type and bounds
    (logic/graph_inputs.py `validate_loop_input` for the decision rule, logic/release_decision.py).
    """

    playbook: NotRequired[Name]
    """The playbook to improve (default "default"); only runs it served teach it."""
    tenant: NotRequired[Name]
    """Whose runs and playbook (default "default"; on the served API, the API key's tenant)."""
    since: NotRequired[Since]
    """Only runs this recent: 7d, 12h, 30m, 2w or an ISO date (default: any not yet consumed)."""
    limit: NotRequired[Annotated[int, Field(ge=1, le=MAX_BATCH)]]
    """The most runs one round learns from (default 200), oldest first: the round's one learn batch.
    """
    share: NotRequired[CanaryShare]
    """Percent of threads a new candidate's canary gets (default 10)."""
    error_rate: NotRequired[ErrorRate]
    margin: NotRequired[Margin]
    min_runs: NotRequired[Runs]
    max_runs: NotRequired[Runs]
    """The canary's decision rule (logic/release_decision.py; defaults 0.05, 0.05, 50, 1600)."""
    lease_s: NotRequired[LeaseSeconds]
    """Seconds a claim on runs, and the round's slot, last if the round dies mid-way (default 1800).
    """
    max_cost: NotRequired[CostBudget]
    max_tokens: NotRequired[TokenBudget]
    """The round's budget (USD; tokens): its learn run's (logic/budget.py)."""


class GateClaim(TypedDict):
    """What the offline gate of a round's learn run claimed (logic/loop.py `gate_of`): replayed
    runs with targets, or nothing."""

    claimed: bool
    val_size: int
    before: float | None
    after: float | None
    accepted: bool
    reason: str


class LoopOutput(TypedDict):
    round: str
    playbook: str
    tenant: str
    status: str
    """learned (a candidate went on canary), nothing (no candidate), skipped (a canary runs, or
    another round)."""
    started_at: str
    finished_at: str
    by: str
    advanced: dict[str, Any] | None
    """A canary decision the rule made when this round looked again."""
    reset: dict[str, Any] | None
    traces: dict[str, Any]
    candidate: dict[str, Any] | None
    gate: dict[str, Any] | None
    canary: dict[str, Any]
    why: str


class LoopState(LoopInput, LoopOutput, total=False):  # type: ignore[misc]
    learned: dict[str, Any]
