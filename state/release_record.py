"""A versioned subject's labels record as the store keeps it: its labels, canary and releases.

TypedDicts, not pydantic models: the record is plain JSON in the store (runtime/storage/labels.py),
read back and changed in place under a lock, while a type checker sees its keys.
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict


class ArmCounts(TypedDict):
    """The trials one arm of a canary has counted."""

    runs: int
    successes: int


class ReleaseArms(TypedDict):
    production: ArmCounts
    canary: ArmCounts


class RuleData(TypedDict):
    """A release's decision rule as stored with it (logic/release_decision.py `Rule`)."""

    error_rate: float
    margin: float
    min_runs: int
    max_runs: int


class LookFigures(TypedDict, total=False):
    """What the rule saw at one look (logic/release_decision.py `decide`); empty between looks."""

    look: int
    looks: int
    runs_per_arm: int
    difference: float
    standard_error: float
    z_needed: float
    z_worse: float
    z_not_worse: float


class Release(TypedDict):
    """A gray release: one version on canary beside production, and its trials."""

    id: str
    version: int
    base: int | None
    """The production version when it started."""
    share: float
    """Percent of threads served the canary."""
    manual: bool
    """A person decides; the rule only looks."""
    rule: RuleData
    started_at: str
    started_by: str
    reason: str
    next_look: int
    looks: list[LookFigures]
    status: str
    """collecting, or undecided after the rule's last look."""
    arms: ReleaseArms
    undecided_reason: NotRequired[str]
    decision: NotRequired[str]
    """promote or rollback, once it has ended."""
    decided_by: NotRequired[str]
    decided_at: NotRequired[str]
    why: NotRequired[str]
    figures: NotRequired[LookFigures]


_LabelMove = TypedDict(
    "_LabelMove",
    {"at": str, "label": str, "from": int | None, "to": int | None, "by": str, "why": str},
)


class LabelEvent(_LabelMove, total=False):
    """A label moved (`from` -> `to`, None for no version), with who, why and when."""

    release_id: str
    share: float
    decision: str


class LabelsRecord(TypedDict):
    """The labels of one versioned subject (a playbook's or a prompt's)."""

    production: int | None
    canary: int | None
    release: Release | None
    """The running canary, if any."""
    releases: list[Release]
    """Ended releases, newest last."""
    events: list[LabelEvent]


class CanaryState(TypedDict, total=False):
    """A playbook's canary as a loop round reports it (logic/loop.py `canary_state`): running (with
    its counts), the last decision, or none."""

    state: str
    """The release's status while it runs, its decision once ended, or none."""
    release_id: str
    version: int
    production: int | None
    share: float
    arms: ReleaseArms
    started_by: str
    decided_by: str
    why: str
    not_started: str
    """Why the round's candidate did not go on canary (a person started one meanwhile)."""


class DecidedRelease(TypedDict):
    """A release a run's trial decided (logic/releases.py `count_run`)."""

    subject: str
    id: str
    version: int
    decision: str
    why: str
