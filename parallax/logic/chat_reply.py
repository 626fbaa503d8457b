"""What a chat turn reads and writes: the text of a human message, the AI reply carrying a run.

Shared by the chat graph's two nodes (the turn and its review), so an answer and its
reviewed version are the same message: its id follows the run's trace (`parallax-<trace>`),
and `add_messages` replaces a message with a known id. The reply's content is the answer
(with an output schema the settled object as JSON; a failed run says why) and
`response_metadata["parallax"]` carries status, confidence, trace id, mode, vote counts, the task the
branches were given (a follow-up condensed to stand alone: logic/conversation.py reads it back) and,
after a review, what the person decided.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

SHOWN = ("status", "confidence", "trace_id", "mode", "vote_counts", "reason", "task", "note")


def text_of(message: BaseMessage) -> str:
    """The text of a message whose content is a string or a list of content blocks (Agent Chat UI sends blocks)."""
    if isinstance(message.content, str):
        return message.content.strip()
    return "\n".join(block.get("text", "") if isinstance(block, dict) else str(block) for block in message.content
                     if not isinstance(block, dict) or block.get("type") == "text").strip()


def reply_text(run: dict[str, Any]) -> str:
    if run.get("status") == "failed":
        return f"The run failed: {run.get('reason') or 'no branch gave an answer'}"
    if run.get("data") is not None:
        return json.dumps(run["data"], ensure_ascii=False)
    return str(run.get("answer") or "")


def reply_message(run: dict[str, Any], content: str | None = None, *, suffix: str = "", **review: Any) -> AIMessage:
    """The AI message for a run; `content` replaces the answer (an edit), `review` adds to its metadata."""
    return AIMessage(id=f"parallax-{run['trace_id']}{suffix}", name="parallax",
                     content=reply_text(run) if content is None else content,
                     response_metadata={"parallax": {**{k: run.get(k) for k in SHOWN}, **review}})
