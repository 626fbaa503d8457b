"""A chat turn: the turn's task runs through the solve graph, and the reply is an AI message.

A turn is the same run as `parallax run`. See docs/internals/runs.md#chat-turns-and-reviews.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.chat_reply import reply_message
from parallax.logic.evaluate import Solver
from parallax.runtime.run_context import context_of, subgraph_config, tenant_of
from parallax.state.chat import ChatState
from parallax.state.context import Context

PASSED_ON = (
    "mode",
    "votes",
    "min_votes",
    "red_team",
    "playbook",
    "output_schema",
    "max_cost",
    "max_tokens",
)
"""What the turn's run is given of the chat input; its budget too, which also holds the rewrite's
call, whose record the run counts as its own first branch (`follow_up`)."""
KEPT = (
    "answer",
    "status",
    "confidence",
    "reason",
    "mode",
    "trace_id",
    "vote_counts",
    "data",
    "objection",
    "note",
)
NO_STREAM = ["nostream"]
"""LangGraph's tag for model calls whose tokens stream mode "messages" leaves out."""


async def answer_turn(
    state: ChatState, runtime: Runtime[Context], *, solve: Solver
) -> dict[str, Any]:
    """`solve` is the solve graph (graphs/chat.py hands it in)."""
    turn = state["turn"]
    tenant = tenant_of(state.get("tenant"))
    given: dict[str, Any] = dict(state)
    run_input = {
        "task": turn["task"],
        "tenant": tenant,
        **({"follow_up": turn["follow_up"]} if turn.get("follow_up") else {}),
        **{k: given[k] for k in PASSED_ON if given.get(k) is not None},
    }
    run = await solve.ainvoke(
        run_input, subgraph_config({"tags": NO_STREAM}), context=context_of(runtime)
    )
    last_run = {"task": turn["task"], **{k: run.get(k) for k in KEPT}, "tenant": tenant}
    return {"messages": [reply_message(last_run)], "last_run": last_run, "review": {}}
