"""State of the `chat` graph: LangGraph's messages state plus the last run and its review.

Why a graph of its own: Studio's chat mode and Agent Chat UI speak `{"messages": [...]}`, and
the solve graph takes a task. The chat graph keeps the conversation in `messages` (the
`add_messages` reducer: a message with a known id replaces that message, so a review can
rewrite the answer it reviewed) and runs each human turn through the solve graph: a follow-up is first
rewritten, with the earlier exchanges, into a task that stands alone (`turn`, nodes/condense_turn.py). `last_run`
is the outcome of that turn's run (status, confidence, trace id, ...), `review` what a person
decided when the run ended `needs_review`. Both are replaced on every turn, never merged.
Run options (`mode`, `votes`, ...) are the caller's only: like any input key they stay on the
thread until the caller sends another value, and no node writes them.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from langgraph.graph import MessagesState
from typing_extensions import TypedDict

from parallax.state.solve import FollowUp, Mode

ReviewKind = Literal["accept", "edit", "reject"]


class ChatInput(MessagesState, total=False):
    """What a chat client sends: messages (Agent Chat UI sends only these) and, optionally, how to run them."""

    mode: Mode
    votes: int
    min_votes: int
    red_team: bool
    playbook: str
    tenant: str
    """Whose playbooks the run reads and under which its trace is stored (on the served API: the key's tenant)."""
    output_schema: dict[str, Any]
    """A JSON Schema of an object: the reply then carries the settled object as JSON (logic/user_schema.py)."""
    max_cost: float
    max_tokens: int
    """The turn's budget (USD; tokens), its follow-up's rewrite and its run together (logic/budget.py)."""


class ChatOutput(MessagesState, total=False):
    last_run: dict[str, Any]
    """The turn's run: task (as the branches saw it), answer, status, confidence, reason, mode, trace_id,
    vote_counts, data, tenant."""
    review: dict[str, Any]
    """A person's decision on a `needs_review` answer: {"kind", "answer", "message"}; {} when none was asked."""


class Turn(TypedDict):
    """The task a turn runs (nodes/condense_turn.py): the human message, or a follow-up rewritten to stand alone."""

    task: str
    follow_up: NotRequired[FollowUp]


class ChatState(ChatInput, ChatOutput, total=False):
    turn: Turn
    """This turn's task, from `condense_turn` to `answer_turn` (replaced every turn; not in the output)."""


class Review(TypedDict):
    kind: ReviewKind
    answer: NotRequired[str]
    """The person's answer, for `edit`."""
    message: NotRequired[str]
    """Why, for `reject` (or a comment)."""
