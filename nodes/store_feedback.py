"""The `feedback` graph's node: a person's score or right answer, stored with the run's trace.

Bad input raises before anything is written (logic/feedback.py).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.feedback import correct_answer, give_feedback
from parallax.logic.graph_inputs import validate_feedback_input
from parallax.logic.run_record import latest_score
from parallax.runtime.run_context import tenant_of
from parallax.state.context import Context
from parallax.state.data_loop import FeedbackState


async def store_feedback(state: FeedbackState, runtime: Runtime[Context]) -> dict[str, Any]:
    store = runtime.store
    if store is None:
        raise RuntimeError(
            "the feedback graph needs a store: run it on the graph API (or compile it with one)"
        )
    validate_feedback_input(state)  # one of score and correct, each within its bounds
    tenant = tenant_of(state.get("tenant"))
    if "correct" in state:
        trace = await correct_answer(
            store, tenant, state["trace_id"], state["correct"], state.get("by", "api")
        )
    else:
        trace = await give_feedback(
            store,
            tenant,
            state["trace_id"],
            state["score"],
            state.get("comment", ""),
            state.get("by", "api"),
        )
    return {
        "trace_id": state["trace_id"],
        "tenant": tenant,
        "score": latest_score(trace),
        "feedback": trace["feedback"],
    }
