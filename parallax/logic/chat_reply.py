"""What a chat turn reads and writes: the human text, and the AI reply that carries a run.

See docs/internals/runs.md#chat-turns-and-reviews.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

SHOWN = ("status", "confidence", "trace_id", "mode", "vote_counts", "reason", "task", "note")


def text_of(message: BaseMessage) -> str:
    """The text of a message whose content is a string or a list of content blocks (Agent Chat UI
    sends blocks)."""
    if isinstance(message.content, str):
        return message.content.strip()
    return "\n".join(
        block.get("text", "") if isinstance(block, dict) else str(block)
        for block in message.content
        if not isinstance(block, dict) or block.get("type") == "text"
    ).strip()


def reply_text(run: dict[str, Any]) -> str:
    if run.get("status") == "failed":
        return f"The run failed: {run.get('reason') or 'no branch gave an answer'}"
    if run.get("data") is not None:
        return json.dumps(run["data"], ensure_ascii=False)
    return str(run.get("answer") or "")


def reply_message(
    run: dict[str, Any], content: str | None = None, *, suffix: str = "", **review: Any
) -> AIMessage:
    """The AI message for a run; `content` replaces the answer (an edit), `review` adds to its
    metadata."""
    return AIMessage(
        id=f"parallax-{run['trace_id']}{suffix}",
        name="parallax",
        content=reply_text(run) if content is None else content,
        response_metadata={"parallax": {**{k: run.get(k) for k in SHOWN}, **review}},
    )
