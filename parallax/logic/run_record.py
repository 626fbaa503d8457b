"""What a run's trace keeps beyond branch lifecycles: its outcome, what it was served, its prompts.

See docs/internals/runs.md#the-trace.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import BaseMessage

from parallax.logic.branch_plans import branch_prompts
from parallax.logic.release_decision import run_success
from parallax.logic.scoring import score
from parallax.state.records import ServedVersion
from parallax.state.solve import SolveState
from parallax.state.trace_record import Message, Outcome, TokenTotals, TraceRecord
from parallax.state.vocabulary import BUSINESS

ROLES = {"system": "system", "human": "user", "ai": "assistant"}


def outcome(state: SolveState) -> Outcome:
    """{"target", "correct", "scorer"} when the run had a target; {} otherwise."""
    target = state.get("target")
    if target is None:
        return {}
    verdict = score(
        {"answer": state.get("answer", ""), "status": state.get("status")},
        str(target),
        state["task"],
        state.get("scorer") or "auto",
    )
    return {"target": str(target), "correct": verdict["correct"], "scorer": verdict["scorer"]}


def succeeded(state: SolveState) -> bool:
    """The run's trial in a gray release (logic/release_decision.py: run_success)."""
    return run_success(state.get("status"), outcome(state).get("correct"), None)


def used_subjects(state: SolveState) -> dict[str, ServedVersion]:
    """subject -> {"version", "arm", "release_id"} for the playbook and the prompts the branches
    used."""
    used = {
        f"prompt/{prompt['name']}" for b in state.get("branches", []) if (prompt := b.get("prompt"))
    }
    return {
        s: c
        for s, c in (state.get("served") or {}).items()
        if s.startswith("playbook/") or s in used
    }


def as_dicts(messages: Iterable[BaseMessage]) -> list[Message]:
    return [{"role": ROLES.get(m.type, m.type), "content": str(m.content)} for m in messages]


def prompt_key(messages: Sequence[Mapping[str, Any]]) -> str:
    return hashlib.sha256(
        json.dumps(messages, ensure_ascii=False, sort_keys=True).encode()
    ).hexdigest()[:16]


def kept_prompts(
    state: SolveState, limit_chars: int
) -> tuple[dict[str, list[Message]], dict[tuple[str, int], str], str]:
    """(prompt key -> messages, (kind, slice index) -> key, why none were kept or "")."""
    if not any(b["kind"] in (*BUSINESS, "candidate") for b in state.get("branches", [])):
        return {}, {}, ""
    built = {where: as_dicts(messages) for where, messages in branch_prompts(state).items()}
    size = sum(len(m["content"]) for messages in built.values() for m in messages)
    if size > limit_chars:
        return (
            {},
            {},
            f"prompts of {size} characters exceed PARALLAX_TRACE_PROMPT_CHARS={limit_chars}",
        )
    keys = {where: prompt_key(messages) for where, messages in built.items()}
    return {keys[where]: messages for where, messages in built.items()}, keys, ""


def latest_score(trace: TraceRecord) -> float | None:
    """A run's feedback: its latest score (logic/feedback.py), None without any."""
    entries = trace.get("feedback") or []
    return float(entries[-1]["score"]) if entries else None


def branch_place(record: Mapping[str, Any]) -> tuple[str, int]:
    """Where a branch record's prompt is in `kept_prompts`: its kind and its slice (or candidate)
    index."""
    if record["kind"] == "candidate":
        return "candidate", (record.get("speculation") or {}).get("index") or 0
    return record["kind"], record.get("slice_index") or 0


TOKEN_FIELDS = ("prompt", "completion", "total", "cached_tokens")


def token_totals(branches: Iterable[Mapping[str, Any]]) -> TokenTotals:
    """The run's tokens: each field of the branches' `tokens` summed (a branch recorded before
    `cached_tokens` existed counts none cached)."""
    totals = dict.fromkeys(TOKEN_FIELDS, 0)
    for branch in branches:
        tokens = branch.get("tokens") or {}
        for name in TOKEN_FIELDS:
            totals[name] += int(tokens.get(name, 0) or 0)
    return cast(TokenTotals, totals)
