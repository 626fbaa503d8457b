"""Input and output of the `loop` graph: one round of learning from stored runs, gating and releasing.

The output is the round record that `parallax loop status` lists (logic/loop.py).
"""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict


class LoopInput(TypedDict):
    playbook: NotRequired[str]
    """The playbook to improve (default "default"); only runs it served teach it."""
    tenant: NotRequired[str]
    """Whose runs and playbook (default "default"; on the served API, the API key's tenant)."""
    since: NotRequired[str]
    """Only runs this recent: 7d, 12h, 30m, 2w or an ISO date (default: any not yet consumed)."""
    limit: NotRequired[int]
    """The most runs one round learns from (default 200), oldest first."""
    share: NotRequired[float]
    """Percent of threads a new candidate's canary gets (default 10)."""
    error_rate: NotRequired[float]
    margin: NotRequired[float]
    min_runs: NotRequired[int]
    max_runs: NotRequired[int]
    """The canary's decision rule (logic/release_decision.py; defaults 0.05, 0.05, 50, 1600)."""
    lease_s: NotRequired[float]
    """Seconds a claim on runs, and the round's slot, last if the round dies mid-way (default 1800)."""
    max_cost: NotRequired[float]
    max_tokens: NotRequired[int]
    """The round's budget (USD; tokens): its learn run's (logic/budget.py)."""


class LoopOutput(TypedDict):
    round: str
    playbook: str
    tenant: str
    status: str
    """learned (a candidate went on canary), nothing (no candidate), skipped (a canary runs, or another round)."""
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
