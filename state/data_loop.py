"""Input and output of the data-loop graphs: `stats`, `feedback` and `release`.

They make `parallax stats`, `feedback` and `playbook|prompts release|canary` reachable on the
graph API.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field, with_config
from typing_extensions import TypedDict

from parallax.state.inputs import (
    CALLER,
    RULE,
    ErrorRate,
    Id,
    Margin,
    Name,
    Note,
    Runs,
    Share,
    Since,
    Version,
    Who,
)

SUBJECT_PATTERN = "^(playbook|prompt)/[A-Za-z0-9_-]{1,64}$"
"""A versioned subject: "playbook/<name>" or "prompt/<name>" (names as state/inputs.py
NAME_PATTERN)."""
SCORE_CHARS = 32


@with_config(CALLER)
class StatsInput(TypedDict):
    """What a caller sends (each field with its type and bounds; `since` is read by
    logic/run_stats.py)."""

    tenant: NotRequired[Name]
    since: NotRequired[Since]
    """7d, 12h, 30m, 2w, or an ISO date."""
    playbook: NotRequired[Name]
    version: NotRequired[Version]


class StatsOutput(TypedDict):
    tenant: str
    filters: dict[str, Any]
    overall: dict[str, Any]
    by_version: list[dict[str, Any]]


# `tenant`, which a caller may leave out, is always in the output: one channel, "optional in,
# required out", which a TypedDict cannot say, so a type checker sees conflicting bases.
class StatsState(StatsInput, StatsOutput, total=False):  # type: ignore[misc]
    pass


@with_config(CALLER)
class FeedbackInput(TypedDict):
    """What a caller sends (each field with its type and bounds; logic/feedback.py reads the
    score)."""

    trace_id: Id
    score: NotRequired[Annotated[str, Field(max_length=SCORE_CHARS)] | float]
    """0..1 (1 = right), or "up" / "down"; or give `correct` instead."""
    correct: NotRequired[Note]
    """The right answer: stored as the run's target, the strongest signal the learning loop reads.
    """
    comment: NotRequired[Note]
    by: NotRequired[Who]
    tenant: NotRequired[Name]


class FeedbackOutput(TypedDict):
    trace_id: str
    tenant: str
    score: float
    feedback: list[dict[str, Any]]


# One channel per key: the input's `score` ("up", "down" or 0..1) is the output's (0..1), and
# `tenant`, which a caller may leave out, is always in the output; a TypedDict cannot say so, so a
# type checker sees conflicting bases.
class FeedbackState(FeedbackInput, FeedbackOutput, total=False):  # type: ignore[misc]
    pass


@with_config(CALLER)
class ReleaseInput(TypedDict):
    """What a caller sends (each field with its type and bounds; logic/release_decision.py checks
    the rule)."""

    subject: Annotated[
        str,
        Field(
            pattern=SUBJECT_PATTERN, json_schema_extra={RULE: "playbook/<name> or prompt/<name>"}
        ),
    ]
    """"playbook/<name>" or "prompt/<name>"."""
    action: Literal["status", "release", "promote", "rollback"]
    version: NotRequired[Version]
    canary: NotRequired[Share]
    """Percent of threads for `release`; leave out to serve the version to every run."""
    manual: NotRequired[bool]
    error_rate: NotRequired[ErrorRate]
    margin: NotRequired[Margin]
    min_runs: NotRequired[Runs]
    max_runs: NotRequired[Runs]
    by: NotRequired[Who]
    """Who, for the history; set it from your authentication layer on a shared server."""
    reason: NotRequired[Note]
    tenant: NotRequired[Name]


class ReleaseOutput(TypedDict):
    view: dict[str, Any]


class ReleaseState(ReleaseInput, ReleaseOutput, total=False):
    pass
