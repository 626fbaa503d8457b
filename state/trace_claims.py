"""Learning from stored runs, typed: a run's claim record, a failed reflection, a round's summary.

TypedDicts: a claim record is plain JSON in the store (runtime/storage/consumed.py), the rest travel
between nodes as plain dicts.
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict


class ReflectionFailure(TypedDict):
    """Why a stored run's reflection failed (logic/trace_learning.py `reflection_failure`)."""

    cause: str
    error: str
    counts: bool
    """The reply came back and could not be used: counted towards giving the run up."""


class FailureNote(TypedDict):
    """A claim record's last failed reflection."""

    cause: str
    error: str
    round: str
    at: str


class ClaimRecord(TypedDict):
    """Whether one stored run has taught a playbook: claimed by a round, or consumed."""

    trace_id: str
    state: str
    """claimed or consumed."""
    round: str
    """The round that claimed it last."""
    at: str
    until: str
    """When the claim expires."""
    commit_key: NotRequired[str]
    """The commit the claiming round is about to make (named before it commits)."""
    outcome: NotRequired[str]
    """Consumed: learned, or unlearnable after MAX_FAILURES counted failures."""
    reason: NotRequired[str]
    failures: NotRequired[int]
    failed_tries: NotRequired[int]
    last_failure: NotRequired[FailureNote]
    not_before: NotRequired[str]
    """Put off after a failed reflection: no round takes it before then."""


class ClaimOutcomes(TypedDict):
    """How many of a playbook's claimed runs went each way (`parallax loop status`)."""

    learned: int
    unlearnable: int
    claimed: int
    waiting: int
    to_retry: int
    next_try_at: str | None


class BatchRuns(TypedDict):
    """Where the runs of one learn batch went (logic/trace_learning.py `consume_runs`)."""

    consumed: int
    dropped: int
    to_retry: int
    unlearnable: int


class TraceClaim(TypedDict):
    """What a `from_traces` learn run considered and claimed (logic/trace_learning.py
    `claim_traces`); its batches add what `BatchRuns` counts."""

    considered: int
    no_signal: int
    task_not_kept: int
    taken_before: int
    recovered: int
    waiting: int
    claimed: int
    by_signal: dict[str, int]
    replayed_in_gate: int
    consumed: int
    to_retry: int
    unlearnable: int
    dropped: int
    round: str
