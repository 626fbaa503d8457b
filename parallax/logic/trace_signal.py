"""What a stored run says about how it went: the signal `learn --from-traces` reflects on.

Strongest first: its target, a person's feedback, its status (docs/data-loop.md, the closed loop).
"""

from __future__ import annotations

from typing import Literal, TypedDict

from parallax.logic.failures import run_failure
from parallax.logic.run_record import latest_score
from parallax.state.records import TaskData
from parallax.state.trace_record import TraceRecord

Source = Literal["target", "feedback", "status"]
MODEL_CAUSES = frozenset({"parse", "length"})
"""Failure causes that are the model's doing, so a lesson could help (runtime/failure_cause.py)."""


class Signal(TypedDict):
    source: Source
    correct: bool
    feedback: str
    """What the reflector is told about the outcome."""


def signal_of(trace: TraceRecord) -> Signal | None:
    """The strongest signal of a stored run (target > feedback > status), or None."""
    answer = trace.get("answer", "")
    if trace.get("target") is not None and trace.get("correct") is not None:
        return {
            "source": "target",
            "correct": bool(trace["correct"]),
            "feedback": f"expected {trace['target']}, got {answer!r}",
        }
    score = latest_score(trace)
    if score is not None:
        comment = trace["feedback"][-1].get("comment") or ""  # a score means an entry
        return {
            "source": "feedback",
            "correct": score >= 0.5,
            "feedback": (
                f"a person scored this answer {score:g} of 1" + (f": {comment}" if comment else "")
            ),
        }
    status = trace.get("status")
    if status == "ok":
        return {
            "source": "status",
            "correct": True,
            "feedback": "status ok: the run's checks passed",
        }
    if status == "needs_review":
        return {
            "source": "status",
            "correct": False,
            "feedback": f"status needs_review: {trace.get('reason') or 'its checks did not pass'}",
        }
    failure = run_failure(trace) if status == "failed" else None
    if failure and failure["cause"] in MODEL_CAUSES:
        return {
            "source": "status",
            "correct": False,
            "feedback": f"status failed ({failure['cause']}): {failure['error']}",
        }
    return None


def task_text(trace: TraceRecord) -> str | None:
    """The run's whole task, or None when only a cut preview was kept."""
    if trace.get("task"):
        return str(trace["task"])
    preview = trace.get("task_preview") or ""
    if preview and len(preview) >= int(trace.get("task_chars") or 0):
        return str(preview)
    return None


def served_by(trace: TraceRecord, playbook: str) -> bool:
    """Whether the run was served `playbook` (a production run of it, either arm of a release). Runs
    that were handed their lessons (the learn graph's own runs and evaluations) were not, and never
    teach it.
    """
    return f"playbook/{playbook}" in (trace.get("served") or {})


def learn_task(trace: TraceRecord, signal: Signal) -> TaskData:
    """The learn graph's task for a stored run: its input, target, and the run itself (`run`), so
    the run is reflected on as it happened instead of being solved again."""
    used = sorted({i for b in trace.get("branches", []) for i in b.get("playbook_item_ids", [])})
    return {
        "id": trace["trace_id"],
        "input": task_text(trace) or "",
        "target": trace.get("target"),
        "scorer": trace.get("scorer") or "auto",
        "signal": signal["source"],
        "run": {
            "trace_id": trace["trace_id"],
            "status": trace.get("status"),
            "answer": trace.get("answer", ""),
            "correct": signal["correct"],
            "feedback": signal["feedback"],
            "scorer": signal["source"],
            "used_item_ids": used,
        },
    }


def replay_task(trace: TraceRecord) -> TaskData:
    """A stored run with a known target as a validation task for the offline gate."""
    return {
        "id": trace["trace_id"],
        "input": task_text(trace) or "",
        "target": trace["target"],
        "scorer": trace.get("scorer") or "auto",
    }
