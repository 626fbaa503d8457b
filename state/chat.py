"""State of the `chat` graph: LangGraph's messages state plus the last run and its review.

`last_run` and `review` are replaced on every turn; run options are the caller's only
(docs/internals/runs.md#chat-turns-and-reviews).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AnyMessage, BaseMessage, convert_to_messages
from langgraph.graph import MessagesState
from langgraph.graph.message import add_messages
from pydantic import BeforeValidator, Field, with_config
from typing_extensions import TypedDict

from parallax.state.inputs import (
    CALLER,
    INPUT_CHARS,
    CostBudget,
    JsonObject,
    Name,
    TokenBudget,
    Votes,
)
from parallax.state.solve import FollowUp
from parallax.state.vocabulary import Mode

ReviewKind = Literal["accept", "edit", "reject"]
MAX_MESSAGES = 200
"""The most messages one request may send (a chat client sends the new turn; the thread keeps the
rest)."""
MAX_PARTS = 100
"""The most content parts (text blocks) of one message."""
MESSAGE_FORM = (
    '{"role": "user" | "assistant" | "system", "content": text} (or {"type": "human", ...})'
)


def _content_chars(content: Any, where: str) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list) and len(content) <= MAX_PARTS:
        return sum(
            (
                len(part)
                if isinstance(part, str)
                else len(str(part.get("text", "")))
                if isinstance(part, dict)
                else 0
            )
            for part in content
        )
    raise ValueError(f"{where}.content must be text or a list of at most {MAX_PARTS} text parts")


def bounded_messages(value: Any) -> list[BaseMessage]:
    """The messages a caller sent as LangChain messages, or ValueError: not a list of at most
    MAX_MESSAGES messages, a message that is none, or more than INPUT_CHARS characters of content in
    all."""
    if not isinstance(value, list) or len(value) > MAX_MESSAGES:
        size = f"{len(value)} messages" if isinstance(value, list) else type(value).__name__
        raise ValueError(f"must be a list of at most {MAX_MESSAGES} messages, got {size}")
    chars = 0
    for n, message in enumerate(value):
        if isinstance(message, BaseMessage):
            chars += _content_chars(message.content, f"[{n}]")
        elif isinstance(message, dict) and isinstance(
            message.get("role", message.get("type")), str
        ):
            chars += _content_chars(message.get("content"), f"[{n}]")
        else:
            raise ValueError(f"[{n}] must be a message: {MESSAGE_FORM}")
        if chars > INPUT_CHARS:
            raise ValueError(f"must hold at most {INPUT_CHARS} characters of content in all")
    try:
        return convert_to_messages(value)
    except (ValueError, NotImplementedError, TypeError):
        raise ValueError(f"must be messages of the form {MESSAGE_FORM}") from None


@with_config(CALLER)
class ChatInput(MessagesState, total=False):
    """What a chat client sends: messages (Agent Chat UI sends only these) and, optionally, how to
    run them; each field with its type and bounds (the run options as the solve input's,
    state/solve.py)."""

    # optional here, required in MessagesState: a request may send none (a follow-up run on a
    # thread), which a TypedDict cannot say, so a type checker sees a conflict
    messages: Annotated[  # type: ignore[misc]
        list[AnyMessage],
        BeforeValidator(bounded_messages),
        Field(json_schema_extra={"maxItems": MAX_MESSAGES}),
        add_messages,
    ]
    """The new turn (LangGraph's messages channel, its reducer last; the bounds are for what one
    request sends)."""
    mode: Mode
    votes: Votes
    min_votes: Votes
    red_team: bool
    playbook: Name
    tenant: Name
    """Whose playbooks the run reads and under which its trace is stored (on the served API: the
    key's tenant)."""
    output_schema: JsonObject
    """A JSON Schema of an object: the reply then carries the settled object as JSON
    (logic/user_schema.py)."""
    max_cost: CostBudget
    max_tokens: TokenBudget
    """The turn's budget (USD; tokens), its follow-up's rewrite and its run together
    (logic/budget.py)."""


class ChatOutput(MessagesState, total=False):
    last_run: dict[str, Any]
    """The turn's run: task (as the branches saw it), answer, status, confidence, reason, mode,
    trace_id, vote_counts, data, tenant."""
    review: dict[str, Any]
    """A person's decision on a `needs_review` answer: {"kind", "answer", "message"}; {} when none
    was asked."""


class Turn(TypedDict):
    """The task a turn runs (nodes/condense_turn.py): the human message, or a follow-up rewritten to
    stand alone."""

    task: str
    follow_up: NotRequired[FollowUp]


class ChatState(ChatInput, ChatOutput, total=False):  # type: ignore[misc]
    turn: Turn
    """This turn's task, from `condense_turn` to `answer_turn` (replaced every turn; not in the
    output)."""


class Review(TypedDict):
    kind: ReviewKind
    answer: NotRequired[str]
    """The person's answer, for `edit`."""
    message: NotRequired[str]
    """Why, for `reject` (or a comment)."""
