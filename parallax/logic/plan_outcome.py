"""When a plan run may end `ok`, and whether the joiner replans instead.

See docs/internals/plans.md#finishing.
"""

from __future__ import annotations

from typing import Any

from parallax.logic.synthesis import Synthesis
from parallax.state.plan import FINISHED, Plan


def missing_required(plan: Plan, records: dict[int, dict[str, Any]]) -> list[int]:
    return [
        t.id
        for t in plan.tasks
        if not t.optional and records.get(t.id, {}).get("status") not in FINISHED
    ]


def should_replan(
    plan: Plan, records: dict[int, dict[str, Any]], replans_left: int, stop: str
) -> str:
    """Why to replan ('' to finish): a required task is missing and a replan is still allowed."""
    missing = missing_required(plan, records)
    if not missing or replans_left <= 0 or stop:
        return ""
    return (
        f"required task{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} did not"
        " finish: replanning"
    )


def task_confidence(record: dict[str, Any]) -> float:
    """A finished task's own confidence (its solve run's; a tool's result is exact; an edit is
    unchecked: 0.5)."""
    if record.get("status") != "DONE":
        return 0.0
    if record.get("confidence") is not None:
        return float(record["confidence"])
    return 1.0 if record.get("kind") == "tool" else 0.5


def _describe(task_id: int, record: dict[str, Any]) -> str:
    return f"task {task_id} {record.get('status', 'missing').lower()}" + (
        f" ({record['reason'][:160]})" if record.get("reason") else ""
    )


def plan_status(
    plan: Plan,
    records: dict[int, dict[str, Any]],
    synthesis: Synthesis,
    verification: dict[str, Any],
    unresolved_keys: list[str],
) -> tuple[str, float, list[str]]:
    """(status, confidence, reasons) of a finished plan run."""
    finished = [i for i, r in records.items() if r["status"] in FINISHED]
    if not finished:
        return (
            "failed",
            0.0,
            [
                "no task finished: "
                + "; ".join(_describe(i, records.get(i, {})) for i in [t.id for t in plan.tasks])[
                    :500
                ]
            ],
        )
    reasons = [
        f"required {_describe(i, records.get(i, {}))}" for i in missing_required(plan, records)
    ]
    reasons += [
        _describe(t.id, records[t.id])
        for t in plan.tasks
        if records.get(t.id, {}).get("status") == "NEEDS_REVIEW"
    ]
    if not synthesis.settled:
        reasons.append(
            f"synthesis ({plan.synthesis}) did not settle"
            + (f": {synthesis.note}" if synthesis.note else "")
        )
    flagged = verification.get("semantics", {}).get("flagged", [])
    if flagged:
        reasons.append(
            f"{len(flagged)} pair{'s' if len(flagged) > 1 else ''} of findings contradict each"
            " other"
        )
    reasons += [f"board key {k!r} holds conflicting results" for k in unresolved_keys]
    required = [t.id for t in plan.tasks if not t.optional] or [t.id for t in plan.tasks]
    confidence = sum(task_confidence(records.get(i, {})) for i in required) / len(required)
    notes = [
        f"optional {_describe(t.id, records.get(t.id, {}))}"
        for t in plan.tasks
        if t.optional and records.get(t.id, {}).get("status") not in FINISHED
    ]
    status = "ok" if not reasons else "needs_review"
    return status, round(confidence * (1.0 if synthesis.settled else 0.5), 3), reasons + notes
