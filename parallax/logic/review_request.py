"""A `needs_review` answer put to a person in the shape chat UIs render, and the decision read back.

See docs/internals/runs.md#chat-turns-and-reviews.
"""

from __future__ import annotations

from typing import Any

from parallax.state.chat import Review

ACTION = "answer"
DECISIONS = ["approve", "edit", "reject"]
WORDS = {
    "approve": "accept",
    "accept": "accept",
    "edit": "edit",
    "reject": "reject",
    "ignore": "reject",
    "response": "reject",
}


class BadDecision(ValueError):
    """The resume value is no decision this review understands; the message says what to send."""


def review_request(run: dict[str, Any]) -> dict[str, Any]:
    """The interrupt value for a run that ended `needs_review` (Agent Chat UI's HITL request)."""
    why = run.get("reason") or "the branches did not settle on one answer"
    return {
        "action_requests": [
            {
                "name": ACTION,
                "args": {"answer": run.get("answer", "")},
                "description": (
                    f"Parallax is not sure of this answer ({why}; confidence"
                    f" {run.get('confidence', 0):.2f}). Accept it, edit it to the right answer"
                    " (stored as the run's target), or reject it."
                ),
            }
        ],
        "review_configs": [{"action_name": ACTION, "allowed_decisions": list(DECISIONS)}],
    }


def _answer_of(args: Any) -> str | None:
    if isinstance(args, dict):
        value = args.get(
            "answer",
            args.get("args", {}).get("answer") if isinstance(args.get("args"), dict) else None,
        )
        return None if value is None else str(value)
    return None if args is None else str(args)


def _one(decision: Any) -> Review:
    if isinstance(decision, str) and decision.strip().lower() in WORDS:
        return {"kind": WORDS[decision.strip().lower()]}  # type: ignore[typeddict-item]
    if not isinstance(decision, dict):
        raise BadDecision(f"cannot read the review decision {decision!r}")
    kind = WORDS.get(str(decision.get("type", "")).lower())
    if kind is None and "answer" in decision:
        kind = "edit"
    if kind == "accept":
        return {"kind": "accept"}
    if kind == "reject":
        message = decision.get(
            "message", decision.get("args") if decision.get("type") == "response" else ""
        )
        return {"kind": "reject", "message": str(message or "")}
    if kind == "edit":
        answer = _answer_of(
            decision.get("edited_action", {}).get("args")
            if "edited_action" in decision
            else decision.get("args", decision)
        )
        if not answer or not answer.strip():
            raise BadDecision(
                'an edit must carry the new answer: {"type": "edit", "edited_action": '
                '{"name": "answer", "args": {"answer": "..."}}}'
            )
        return {"kind": "edit", "answer": answer.strip()}
    raise BadDecision(
        f"unknown review decision {decision.get('type')!r}: send approve, edit or reject"
    )


def decision_of(resume: Any) -> Review:
    """The person's decision from a resume value (docs/internals/runs.md lists the shapes)."""
    if isinstance(resume, dict) and "decisions" in resume:
        resume = resume["decisions"]
    if isinstance(resume, list):
        if len(resume) != 1:
            raise BadDecision(
                f"expected one decision for the one answer under review, got {len(resume)}"
            )
        resume = resume[0]
    return _one(resume)
