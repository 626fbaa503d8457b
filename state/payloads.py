"""Pydantic models for what crosses a trust boundary: model replies and branch records.

Every reply is parsed into one before a merge may use it, so a malformed reply is a failed branch.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model, field_validator

from parallax.state.lifecycle import BranchState, Transition
from parallax.state.vocabulary import BranchKind

BranchStatus = Literal["ok", "failed", "timeout", "cancelled"]
"""`cancelled`: a vote still in flight when the vote settled without it (never counted, never asked
again)."""
VOTE_REASONING_CHARS = 280
VOTE_ANSWER_CHARS = 60
"""A vote's working and final value, in characters (about 70 and 15 tokens at four characters a
token): measured on the embedded model, replies then end well inside the 384-token cap, where
unbounded ones hit it one time in four. Sized, as the slice's, for the worst case of a token per
character: the longest reply the schema allows is 368 characters as compact JSON (300 + 60 made it
388, over the cap)."""
SLICE_POINTS = 2
QUOTE_CHARS = 60
POINT_CHARS = 90
"""A slice reply: at most 2 findings, each a quote of at most 60 and a point of at most 90
characters. Sized for the worst case, a token per character: SmolLM2 writes a digit as one token,
and on filing tables it fills a point with "1.0000.0000…". The longest reply the schema allows is
then 376 characters as compact JSON and 354 tokens as the model lays it out, under the 384-token
cap. Unbounded, every slice of a HotpotQA document ran to the cap; bounded at 3 findings of 120 +
160 characters (sized at four characters a token), 18% of slices over FinanceBench pages still did
(bench/section_cap.py)."""
JUDGE_REASON_CHARS = 200
"""The judge's one sentence (about 50 tokens); its choice is one of the candidates (`judge_reply`).
"""


def nonblank(value: str, why: str) -> str:
    """A reply's text, stripped; blank raises ValueError(`why`), which makes the reply bad
    (re-asked)."""
    if not value.strip():
        raise ValueError(why)
    return value.strip()


class Answer(BaseModel):
    """Reply of a `direct` or `vote` branch.

    Both fields are required so that schema-to-grammar converters (llama.cpp orders
    required keys first) keep `reasoning` before `answer`: a small model then works
    before it answers. A direct answer's length is bounded only by the token cap.
    """

    reasoning: str = Field(description="one or two sentences of working")
    answer: str = Field(description="the answer; in a vote, only the final answer")

    @field_validator("answer")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        """An empty answer is a bad reply (re-asked), not a vote for ''. Checked here, not in the
        schema."""
        return nonblank(value, "the answer is empty")


# Why a vote's reply is bounded in its schema: an endpoint that turns a JSON Schema into a grammar
# (llama.cpp, the embedded server) then cannot let a small model ramble past the token cap, and the
# final value stands in its own short field (logic/vote.py reduces it further before counting). The
# bounds are in the schema only: a longer reply from an endpoint that ignores them is still read,
# not re-asked.
class VoteAnswer(Answer):
    """Reply of a `vote` branch: its working and its final value, each of bounded length."""

    reasoning: str = Field(
        json_schema_extra={"maxLength": VOTE_REASONING_CHARS},
        description="one or two short sentences of working",
    )
    answer: str = Field(
        json_schema_extra={"minLength": 1, "maxLength": VOTE_ANSWER_CHARS},
        description="only the final value: a number, a word, yes or no, or an option letter",
    )


class FileEdit(BaseModel):
    """A further file a speculative candidate writes beside its answer (inside its own folder
    only)."""

    path: str = Field(description="relative to the candidate's folder")
    content: str = Field(description="the complete content of the file")


class CandidateAnswer(Answer):
    """Reply of a speculative `candidate` branch: its working, its answer and, optionally, further
    files."""

    files: list[FileEdit] = Field(
        default_factory=list, description="further files to write, usually none"
    )


class Comparison(BaseModel):
    """Reply of a `compare` call of the speculative tournament: which of two candidates (A or B) is
    better."""

    reason: str = Field(description="one sentence against the rubric")
    better: Literal["A", "B"] = Field(description="A or B")


class QuotedPoint(BaseModel):
    """One finding and the words of the source it rests on (checked against the slice, no model
    call).

    `quote` comes first so that a small model copies the evidence before it writes the point. Both
    are bounded in the schema only (as a vote's reply is): a longer one from an endpoint that
    ignores the bounds is still read."""

    quote: str = Field(
        json_schema_extra={"maxLength": QUOTE_CHARS},
        description="a few words copied exactly from this part that support the point",
    )
    point: str = Field(
        json_schema_extra={"maxLength": POINT_CHARS},
        description="the finding, in one short sentence",
    )


class SliceFinding(BaseModel):
    """Reply of a `slice` branch: what this slice alone says about the question, each point with its
    quote."""

    relevant: bool = Field(description="does this part of the document help answer the question")
    points: list[QuotedPoint] = Field(
        default_factory=list,
        json_schema_extra={"maxItems": SLICE_POINTS},
        description="at most two findings from this part only, each with a quote",
    )

    @field_validator("points", mode="before")
    @classmethod
    def _bare_points_have_no_quote(cls, value: object) -> object:
        """A bare string (older replies and records) is a point without a quote: it will not
        verify."""
        if isinstance(value, list):
            return [{"quote": "", "point": v} if isinstance(v, str) else v for v in value]
        return value


class JudgeDecision(BaseModel):
    """Reply of the arbitration call when the votes do not agree (asked through `judge_reply`)."""

    choice: str = Field(description="the candidate answer judged correct, copied exactly")
    reason: str = Field(default="", json_schema_extra={"maxLength": JUDGE_REASON_CHARS})


@functools.lru_cache(maxsize=32)
def judge_reply(candidates: tuple[str, ...]) -> type[JudgeDecision]:
    """The judge's reply schema for these candidates: `choice` is one of them (a JSON Schema
    `enum`).

    An endpoint that turns the schema into a grammar (llama.cpp) can then only write one of the
    candidates, copied exactly, not an index or a new answer. A reply from an endpoint that ignores
    the enum is still read, and nodes/judge.py says what it chose instead."""
    return create_model(
        "JudgeDecision",
        __base__=JudgeDecision,
        choice=(
            str,
            Field(
                json_schema_extra={"enum": list(candidates)},
                description="the candidate answer judged correct, copied exactly",
            ),
        ),
    )


class Objection(BaseModel):
    """Reply of the red-team branch, which argues against the leading answer and never votes."""

    objection: str
    severity: Literal["low", "medium", "high"] = "medium"


class Contradiction(BaseModel):
    """Reply of the check on two findings that look alike: do they contradict each other?"""

    reason: str = Field(description="one sentence")
    contradicts: bool = Field(description="true only if both cannot be true at once")


class CondensedTask(BaseModel):
    """Reply of a chat's `condense` call: the follow-up rewritten as a task that can be answered
    alone."""

    task: str = Field(
        description="the follow-up as a self-contained task, with every fact it refers to"
    )

    @field_validator("task")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return nonblank(value, "the task is empty")


class Tokens(BaseModel):
    prompt: int = 0
    completion: int = 0
    total: int = 0
    cached_tokens: int = Field(
        default=0,
        description=(
            "of `prompt`, the tokens the endpoint read from its prefix cache "
            "(usage.prompt_tokens_details.cached_tokens), billed at a discount"
        ),
    )


class BranchRecord(BaseModel):
    """The trace of one branch, stored with the run in the checkpoint."""

    id: str
    parent_id: str
    kind: BranchKind
    status: BranchStatus
    attempts: int = 1
    reasks: int = 0
    latency_ms: float = 0.0
    tokens: Tokens = Field(default_factory=Tokens)
    cost_usd: float | None = Field(
        default=None,
        description=(
            "what its tokens cost in USD at the price table in force "
            "when it ran (runtime/prices.py); None: the model has no price"
        ),
    )
    output: dict[str, Any] | None = None
    error: str | None = None
    cause: str | None = Field(
        default=None,
        description=(
            "why it failed, in one word: connection, timeout, circuit_open, "
            "rate_limit, server_error, client_error, parse, length, crash"
        ),
    )
    model: str | None = None
    temperature: float | None = None
    slice_index: int | None = None
    vote: str | None = Field(default=None, description="normalised answer, vote branches only")
    playbook_item_ids: list[str] = Field(default_factory=list)
    state: BranchState | None = Field(
        default=None, description="where the lifecycle ended (state/lifecycle.py)"
    )
    transitions: list[Transition] = Field(
        default_factory=list, description="state/lifecycle.py Transition dicts"
    )
    backup: dict[str, Any] | None = Field(
        default=None, description="the straggler race, when a backup copy ran"
    )
    input: dict[str, Any] | None = Field(
        default=None, description="what an escalated branch was asked, for `dlq retry`"
    )
    prompt: dict[str, Any] | None = Field(
        default=None, description="the prompt template it was built from: {name, version}"
    )
    budget_seen: dict[str, Any] | None = Field(
        default=None,
        description=(
            "a run with a budget: when the branch was let start and what the run had spent then "
            "({at, tokens, cost_usd}; logic/budget.py)"
        ),
    )
    speculation: dict[str, Any] | None = Field(
        default=None,
        description=(
            "a speculative candidate: its approach, its check and whether it won (and why not)"
        ),
    )


class ItemTag(BaseModel):
    id: str
    tag: Literal["helpful", "harmful", "neutral"] = "neutral"


class Reflection(BaseModel):
    """Reply of the reflector: one run, its lessons and verdicts on the items it used."""

    diagnosis: str
    lessons: list[str] = Field(default_factory=list)
    item_tags: list[ItemTag] = Field(default_factory=list)


class CuratedEntry(BaseModel):
    section: str = "general"
    text: str
    about: list[str] = Field(default_factory=list)


class Curation(BaseModel):
    """Reply of the curator: playbook entries from ONE reflection."""

    entries: list[CuratedEntry] = Field(default_factory=list)
