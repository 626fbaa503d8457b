"""The chat graph's prompt: a follow-up and the conversation before it condensed into one task.

See docs/internals/runs.md#chat-turns-and-reviews.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from parallax.prompts.templates import JSON_RULE

CONDENSE_SYSTEM = (
    "You rewrite the last message of a conversation as a task that can be done without the"
    " conversation. "
    "Replace every word that points back (that, it, the result, the same, them) by what it refers"
    " to, and "
    "copy every number, name and fact the task needs from the earlier turns. Do not answer it, do"
    " not add "
    "anything it does not ask. If it already stands alone, return it unchanged. Reply with a JSON"
    " object "
    f'with one key, "task". {JSON_RULE}'
)


def condense_messages(earlier: list[tuple[str, str]], follow_up: str) -> list[BaseMessage]:
    """`earlier`: (task, answer) of each earlier exchange, oldest first; `follow_up`: the message to
    rewrite."""
    turns = "\n\n".join(
        f"Turn {n}\nTask: {task}\nAnswer: {answer}" for n, (task, answer) in enumerate(earlier, 1)
    )
    return [
        SystemMessage(CONDENSE_SYSTEM),
        HumanMessage(f"Earlier turns:\n\n{turns}\n\nLast message: {follow_up}"),
    ]
