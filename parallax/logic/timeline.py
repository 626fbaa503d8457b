"""A run over time: the lanes `parallax trace ID --timeline FILE` draws, as data.

A pure function of a stored trace, so the CLI and the served API draw the same picture.
See docs/internals/runs.md#timelines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from parallax.state.lifecycle import Transition
from parallax.state.trace_record import TraceBranch, TraceRecord

Phase = Literal["queued", "running", "failed", "retry"]
End = Literal["completed", "escalated", "cancelled", "open"]

_PHASE_OF: dict[str, Phase] = {
    "PENDING": "queued",
    "DISPATCHED": "queued",
    "IN_PROGRESS": "running",
    "TIMEOUT": "failed",
    "FAILED": "failed",
    "RETRY": "retry",
}
_END_OF: dict[str, End] = {
    "COMPLETED": "completed",
    "ESCALATED": "escalated",
    "CANCELLED": "cancelled",
}


@dataclass(frozen=True)
class Segment:
    """One stretch of a lane: `start` and `end` in seconds from the run's first recorded moment."""

    phase: Phase
    start: float
    end: float
    reason: str = ""


@dataclass
class Lane:
    """One branch (or one copy of a raced branch, or one plan task) drawn as a row."""

    id: str
    kind: str
    label: str
    status: str
    end: End
    segments: list[Segment]
    attempts: int = 1
    wave: int | None = None
    """An adaptive vote's wave, from 1; None for other branches."""
    task: int | None = None
    """The plan task the branch ran for, or the task this lane is (kind `task`)."""
    copy: Literal["", "original", "backup"] = ""
    """A raced branch's copies each get a lane: which copy this is."""
    winner: bool = True
    """False for the copy of a raced branch that lost (and was cancelled)."""
    deps: list[int] = field(default_factory=list)
    """A plan task's dependencies (kind `task`)."""
    waited_on: int | None = None
    """A plan task's dependency that finished last: the edge that held it up."""

    @property
    def start(self) -> float:
        return self.segments[0].start if self.segments else 0.0

    @property
    def finish(self) -> float:
        return self.segments[-1].end if self.segments else 0.0


@dataclass
class Timeline:
    trace_id: str
    mode: str
    status: str
    origin: float
    """Unix time of the run's first recorded moment: every `start`/`end` counts from it."""
    duration: float
    lanes: list[Lane]
    waves: list[float]
    """When each wave of an adaptive vote was planned (seconds from `origin`), first wave first."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, as the served API hands it out (`start`/`end` in seconds from `origin`)."""
        return asdict(self)


def _segments(transitions: Sequence[Transition], origin: float) -> tuple[list[Segment], End]:
    """A lifecycle as segments; the last transition's state is the lane's end (or `open`)."""
    segments: list[Segment] = []
    for step, following in zip(transitions, transitions[1:], strict=False):
        phase = _PHASE_OF.get(step["state"])
        if phase is None:
            continue
        start, end = step["at"] - origin, following["at"] - origin
        reason = step["reason"] if phase in ("failed", "retry") else ""
        if segments and segments[-1].phase == phase and not reason:
            segments[-1] = Segment(phase, segments[-1].start, round(end, 3), segments[-1].reason)
        else:
            segments.append(Segment(phase, round(start, 3), round(end, 3), reason))
    last = transitions[-1]["state"] if transitions else ""
    return segments, _END_OF.get(last, "open")


def _origin(trace: TraceRecord) -> float:
    moments = [t["at"] for b in trace.get("branches", []) for t in b.get("transitions") or []]
    moments += [
        t["at"]
        for b in trace.get("branches", [])
        for t in (b.get("backup") or {}).get("other_transitions") or []
    ]
    moments += [t["started_at"] for t in trace.get("tasks", []) if t.get("started_at")]
    return min(moments) if moments else 0.0


def _branch_lanes(branch: TraceBranch, origin: float) -> list[Lane]:
    """The lane of a branch, or two when a backup copy raced it (the winner's record keeps both
    lifecycles)."""
    segments, end = _segments(branch.get("transitions") or [], origin)
    lane = Lane(
        id=branch["id"],
        kind=branch["kind"],
        label=branch["id"],
        status=branch["status"],
        end=end,
        segments=segments,
        attempts=int(branch.get("attempts") or 1),
        task=branch.get("task"),
    )
    backup = branch.get("backup")
    if not backup:
        return [lane]
    other_segments, other_end = _segments(backup.get("other_transitions") or [], origin)
    backup_won = backup.get("winner") == "backup"
    other = Lane(
        id=f"{branch['id']}~{'original' if backup_won else 'backup'}",
        kind=branch["kind"],
        label=f"{branch['id']} ({'original' if backup_won else 'backup'})",
        status="cancelled",
        end=other_end,
        segments=other_segments,
        task=branch.get("task"),
        copy="original" if backup_won else "backup",
        winner=False,
    )
    lane.copy = "backup" if backup_won else "original"
    lane.label = f"{branch['id']} ({lane.copy}, won)"
    return [other, lane] if backup_won else [lane, other]


def _mark_waves(lanes: list[Lane]) -> list[float]:
    """Number the waves of a vote's lanes; the moments the waves were planned.

    A wave's votes are planned together, and the next wave only once every one of them has come back
    (or was cancelled): so a vote planned at or after the last return of the current wave opens a
    new one. Both copies of a raced vote belong to the wave of the original, planned first."""
    planned: dict[str, float] = {}
    returned: dict[str, float] = {}
    for lane in lanes:
        if lane.kind == "vote" and lane.segments:
            key = lane.id.split("~")[0]
            planned[key] = min(planned.get(key, lane.start), lane.start)
            returned[key] = max(returned.get(key, lane.finish), lane.finish)
    waves: list[float] = []
    wave_of: dict[str, int] = {}
    back = float("-inf")
    for key in sorted(planned, key=planned.__getitem__):
        if not waves or planned[key] >= back:
            waves.append(planned[key])
            back = float("-inf")
        wave_of[key] = len(waves)
        back = max(back, returned[key])
    for lane in lanes:
        lane.wave = wave_of.get(lane.id.split("~")[0]) if lane.kind == "vote" else None
    return waves


def _task_lanes(trace: TraceRecord, origin: float) -> list[Lane]:
    """A plan's tasks of its last round, each with its dependencies and the one it waited on
    longest."""
    tasks = trace.get("tasks") or []
    if not tasks:
        return []
    last_round = max(int(t.get("round", 0)) for t in tasks)
    current = {int(t["id"]): t for t in tasks if int(t.get("round", 0)) == last_round}
    lanes: list[Lane] = []
    for task_id, task in sorted(current.items()):
        started, finished = task.get("started_at"), task.get("finished_at")
        segments = (
            [Segment("running", round(started - origin, 3), round(finished - origin, 3))]
            if started and finished
            else []
        )
        deps = [int(d) for d in task.get("deps", [])]
        finished_deps = [(current[d].get("finished_at") or 0.0, d) for d in deps if d in current]
        status = str(task.get("status", ""))
        lanes.append(
            Lane(
                id=f"task-{task_id}",
                kind="task",
                label=f"task {task_id}: {task.get('goal', '')}"[:60],
                status=status,
                end=(
                    "completed"
                    if status in ("DONE", "NEEDS_REVIEW")
                    else (
                        "escalated"
                        if status == "FAILED"
                        else "cancelled"
                        if status == "SKIPPED"
                        else "open"
                    )
                ),
                segments=segments,
                task=task_id,
                deps=deps,
                waited_on=max(finished_deps)[1] if finished_deps else None,
            )
        )
    return lanes


def timeline(trace: TraceRecord) -> Timeline:
    """The lanes of a stored trace: plan tasks first (each followed by its branches), else branches
    in the order they were planned."""
    origin = _origin(trace)
    branch_lanes = [
        lane for branch in trace.get("branches", []) for lane in _branch_lanes(branch, origin)
    ]
    waves = _mark_waves(branch_lanes) if trace.get("mode") == "vote" else []
    task_lanes = _task_lanes(trace, origin)
    if task_lanes:
        ordered = [lane for lane in branch_lanes if lane.task is None]
        for task_lane in task_lanes:
            ordered += [task_lane, *[lane for lane in branch_lanes if lane.task == task_lane.task]]
        lanes = ordered
    else:
        lanes = sorted(branch_lanes, key=lambda lane: (lane.start, lane.wave or 0))
    duration = max((lane.finish for lane in lanes), default=0.0)
    return Timeline(
        trace_id=trace.get("trace_id", ""),
        mode=str(trace.get("mode") or ""),
        status=str(trace.get("status") or ""),
        origin=origin,
        duration=round(duration, 3),
        lanes=lanes,
        waves=waves,
    )
