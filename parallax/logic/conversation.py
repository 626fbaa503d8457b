"""What of a chat's earlier turns a follow-up is condensed with, bounded.

See docs/internals/runs.md#chat-turns-and-reviews.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from parallax.logic.chat_reply import text_of

WINDOW_TURNS = 6
TURN_CHARS = 1200
WINDOW_CHARS = 6000


def _clip(text: str) -> str:
    return text if len(text) <= TURN_CHARS else text[: TURN_CHARS - 1] + "…"


def earlier_exchanges(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """(task, answer) of each exchange in `messages` (the conversation before the follow-up), oldest
    first, bounded. An exchange is a human message and the AI messages after it: its task is the one
    its first reply says it ran (else the human's text), its answer the last reply's text (an edit
    in review replaced it).
    """
    exchanges: list[tuple[str, str]] = []
    task, answer = "", None
    for message in messages:
        if message.type == "human":
            if task and answer is not None:
                exchanges.append((task, answer))
            task, answer = text_of(message), None
        elif message.type == "ai" and task:
            if answer is None:
                ran = (message.response_metadata or {}).get("parallax", {}).get("task")
                task = ran if isinstance(ran, str) and ran.strip() else task
            answer = text_of(message)
    if task and answer is not None:
        exchanges.append((task, answer))
    kept = [(_clip(t), _clip(a)) for t, a in exchanges[-WINDOW_TURNS:]]
    while len(kept) > 1 and sum(len(t) + len(a) for t, a in kept) > WINDOW_CHARS:
        kept.pop(0)
    return kept


def transcript_task(earlier: list[tuple[str, str]], follow_up: str) -> str:
    """The follow-up with the bounded exchanges before it, as one task (when the condense call
    failed)."""
    turns = "\n".join(f"Q: {task}\nA: {answer}" for task, answer in earlier)
    return f"Earlier in this conversation:\n{turns}\n\nNow: {follow_up}"
