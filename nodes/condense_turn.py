"""A chat's last human message made into its run's task: itself, or a self-contained rewrite.

See docs/internals/runs.md#chat-turns-and-reviews.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.runnables import RunnableLambda
from langgraph.runtime import Runtime

from parallax.logic.budget import RunBudget, limits_of
from parallax.logic.chat_reply import text_of
from parallax.logic.conversation import earlier_exchanges, transcript_task
from parallax.logic.graph_inputs import validate_chat_input
from parallax.logic.routing import InvalidInput
from parallax.prompts.chat import condense_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of
from parallax.state.chat import ChatState
from parallax.state.context import Context
from parallax.state.payloads import CondensedTask

NO_STREAM = ["nostream"]
"""LangGraph's tag for model calls whose tokens stream mode "messages" leaves out."""


async def condense_turn(state: ChatState, runtime: Runtime[Context]) -> dict[str, Any]:
    validate_chat_input(
        state, context_of(runtime), with_messages=False
    )  # the run options; messages are the thread's
    messages = list(state.get("messages") or [])
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].type == "human"), None)
    asked = text_of(messages[last]) if last is not None else ""
    if not asked:
        raise InvalidInput("send a human message with some text: it is the task")
    earlier = earlier_exchanges(messages[:last])
    if not earlier:
        return {"turn": {"task": asked}}
    ctx = context_of(runtime)
    identity = {"id": f"condense-{uuid.uuid4().hex[:8]}", "parent_id": "", "kind": "condense"}

    limits = limits_of(state)

    async def call(_: Any) -> Any:
        with holding(
            RunBudget(limits) if limits else None
        ):  # the turn's budget: its run counts this call too
            return await call_branch(
                identity,
                condense_messages(earlier, asked),
                CondensedTask,
                ctx,
                model=ctx.reviewer_model,
                temperature=0.0,
            )

    record, reply = await RunnableLambda(call).ainvoke(
        None, {"tags": NO_STREAM, "run_name": "condense"}
    )
    task = reply.task if reply is not None else transcript_task(earlier, asked)
    return {
        "turn": {
            "task": task,
            "follow_up": {
                "asked": asked,
                "earlier_turns": len(earlier),
                "condense": record.model_dump(),
            },
        }
    }
