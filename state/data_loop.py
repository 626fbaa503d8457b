"""Input and output of the data-loop graphs: `stats`, `feedback` and `release`.

They make the CLI's `parallax stats`, `parallax feedback` and `parallax playbook|prompts
release|canary` reachable under the graph API, reading and writing the server's store.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict


class StatsInput(TypedDict):
    tenant: NotRequired[str]
    since: NotRequired[str]
    """7d, 12h, 30m, 2w, or an ISO date."""
    playbook: NotRequired[str]
    version: NotRequired[int]


class StatsOutput(TypedDict):
    tenant: str
    filters: dict[str, Any]
    overall: dict[str, Any]
    by_version: list[dict[str, Any]]


# `tenant`, which a caller may leave out, is always in the output: one channel, "optional in, required out",
# which a TypedDict cannot say, so a type checker sees conflicting bases.
class StatsState(StatsInput, StatsOutput, total=False):  # type: ignore[misc]
    pass


class FeedbackInput(TypedDict):
    trace_id: str
    score: NotRequired[str | float]
    """0..1 (1 = right), or "up" / "down"; or give `correct` instead."""
    correct: NotRequired[str]
    """The right answer: stored as the run's target, the strongest signal the learning loop reads."""
    comment: NotRequired[str]
    by: NotRequired[str]
    tenant: NotRequired[str]


class FeedbackOutput(TypedDict):
    trace_id: str
    tenant: str
    score: float
    feedback: list[dict[str, Any]]


# One channel per key: the input's `score` ("up", "down" or 0..1) is the output's (0..1), and `tenant`, which a
# caller may leave out, is always in the output; a TypedDict cannot say so, so a type checker sees conflicting bases.
class FeedbackState(FeedbackInput, FeedbackOutput, total=False):  # type: ignore[misc]
    pass


class ReleaseInput(TypedDict):
    subject: str
    """"playbook/<name>" or "prompt/<name>"."""
    action: Literal["status", "release", "promote", "rollback"]
    version: NotRequired[int]
    canary: NotRequired[float]
    """Percent of threads for `release`; leave out to serve the version to every run."""
    manual: NotRequired[bool]
    error_rate: NotRequired[float]
    margin: NotRequired[float]
    min_runs: NotRequired[int]
    max_runs: NotRequired[int]
    by: NotRequired[str]
    """Who, for the history; set it from your authentication layer on a shared server."""
    reason: NotRequired[str]
    tenant: NotRequired[str]


class ReleaseOutput(TypedDict):
    view: dict[str, Any]


class ReleaseState(ReleaseInput, ReleaseOutput, total=False):
    pass
