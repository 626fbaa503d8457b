"""A person's verdict on a run, as `parallax feedback` and the `feedback` graph store it.

A score (0 to 1, `up`, `down`) is stored with the trace and corrects the run's gray-release trial;
`correct_answer` makes a person's answer the trace's target, with a feedback entry scoring whether
the run matched it. See docs/data-loop.md.
"""

from __future__ import annotations

import math

from langgraph.store.base import BaseStore

from parallax.logic.releases import correct_trial
from parallax.logic.run_record import latest_score
from parallax.logic.scoring import score as score_answer
from parallax.runtime.storage.stores import traces_in
from parallax.state.trace_record import TraceRecord

WORDS = {"up": 1.0, "down": 0.0}
MAX_COMMENT = 2000


class BadFeedback(ValueError):
    """The score or comment cannot be stored; the message says what to give instead."""


def parse_score(raw: str | float | int) -> float:
    """0..1, or up/down; BadFeedback otherwise."""
    if isinstance(raw, str) and raw.strip().lower() in WORDS:
        return WORDS[raw.strip().lower()]
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise BadFeedback(f"bad score {raw!r}: give a number from 0 to 1, or up / down") from None
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise BadFeedback(f"bad score {raw!r}: give a number from 0 to 1, or up / down")
    return value


async def give_feedback(
    store: BaseStore,
    tenant: str,
    trace_id: str,
    score: str | float,
    comment: str = "",
    by: str = "",
) -> TraceRecord:
    """Store a score with the trace and correct its release trial; the trace after. Bad input or an
    unknown trace raises (BadFeedback, StoreError) before anything is written."""
    value = parse_score(score)
    if len(comment) > MAX_COMMENT:
        raise BadFeedback(f"comment of {len(comment)} characters: keep it under {MAX_COMMENT}")
    before, after = await traces_in(store, tenant).add_feedback(
        trace_id, {"score": value, "comment": comment, "by": by}
    )
    await correct_trial(store, tenant, before, latest_score(before), latest_score(after))
    return after


async def correct_answer(
    store: BaseStore, tenant: str, trace_id: str, answer: str, by: str = ""
) -> TraceRecord:
    """Store a person's answer as the run's target (with whether the run's answer matched it) and as
    feedback (1 when it matched, else 0, the answer in the comment); the trace after. An empty
    answer raises BadFeedback, an unknown trace StoreError, before anything is written."""
    answer = answer.strip()
    if not answer:
        raise BadFeedback(
            "an edited answer cannot be empty: give the right answer, or reject the run's"
        )
    if len(answer) > MAX_COMMENT:
        raise BadFeedback(f"edited answer of {len(answer)} characters: keep it under {MAX_COMMENT}")
    traces = traces_in(store, tenant)
    trace = await traces.get_trace(trace_id)
    trace_id = trace["trace_id"]  # a short id names its whole one
    verdict = score_answer(
        {"answer": trace.get("answer", ""), "status": trace.get("status")},
        answer,
        trace.get("task_preview", ""),
        trace.get("scorer") or "auto",
    )
    await traces.set_outcome(
        trace_id, {"target": answer, "correct": verdict["correct"], "scorer": verdict["scorer"]}
    )
    return await give_feedback(
        store,
        tenant,
        trace_id,
        1.0 if verdict["correct"] else 0.0,
        f"answer edited in review: {answer}",
        by,
    )
