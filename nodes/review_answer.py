"""A `needs_review` answer put to a person, and their decision (accept, edit, reject) applied.

See docs/internals/runs.md#chat-turns-and-reviews.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from parallax.logic.chat_reply import reply_message
from parallax.logic.feedback import correct_answer, give_feedback
from parallax.logic.review_request import decision_of, review_request
from parallax.runtime.run_context import tenant_of
from parallax.state.chat import ChatState
from parallax.state.context import Context

BY = "chat review"


async def review_answer(state: ChatState, runtime: Runtime[Context]) -> dict[str, Any]:
    run = state["last_run"]
    decision = decision_of(interrupt(review_request(run)))
    store, trace_id = runtime.store, str(run.get("trace_id") or "")
    tenant = tenant_of(run.get("tenant"))
    if decision["kind"] == "accept":
        if store is not None:
            await give_feedback(store, tenant, trace_id, 1.0, "accepted in review", BY)
        messages = [reply_message(run, review="accepted")]
    elif decision["kind"] == "edit":
        if store is not None:
            await correct_answer(store, tenant, trace_id, decision["answer"], BY)
        messages = [
            reply_message(
                run, decision["answer"], review="edited", original_answer=run.get("answer", "")
            )
        ]
    else:
        why = decision.get("message") or ""
        if store is not None:
            await give_feedback(
                store, tenant, trace_id, 0.0, f"rejected in review{': ' + why if why else ''}", BY
            )
        rejected = f"Rejected in review: the answer {run.get('answer', '')!r} was not kept" + (
            f" ({why})." if why else "."
        )
        messages = [reply_message(run, rejected, suffix="-rejected", review="rejected")]
    return {"messages": messages, "review": decision}
