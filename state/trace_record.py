"""A run's trace as the store keeps it: what stats, exports, timelines, telemetry and learning read.

TypedDicts, not pydantic models: a trace is plain JSON in the store and is read back as such
(`as_trace`), while a type checker sees its keys. Required keys are the ones `nodes/record_trace.py`
always writes; a trace written before a key existed lacks it, so readers of later keys use `.get`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, cast

from typing_extensions import TypedDict

from parallax.state.lifecycle import Transition
from parallax.state.records import (
    BranchFields,
    CheckResult,
    JsonSchema,
    Provenance,
    ServedVersion,
    Spend,
)
from parallax.state.vocabulary import BranchKind


class Message(TypedDict):
    """One chat message a branch was sent, as the trace keeps it."""

    role: str
    content: str


class VoteCount(TypedDict):
    """One answer of a vote and its count (a list, not a dict: redaction rewrites no keys)."""

    answer: str
    count: int


class FeedbackEntry(TypedDict):
    """A person's score of a run (logic/feedback.py), newest last."""

    score: float
    comment: str
    by: str
    at: str


class AskedFollowUp(TypedDict):
    """A chat follow-up the task was condensed from: what was asked, how many turns were shown."""

    asked: str
    earlier_turns: int


class TokenTotals(TypedDict):
    """The run's tokens: each field of its branches' `tokens` summed (logic/run_record.py)."""

    prompt: int
    completion: int
    total: int
    cached_tokens: int


class TraceBranch(BranchFields):
    """A branch record as the trace keeps it: without its `input`, with where its prompt is kept."""

    prompt_key: NotRequired[str]
    """The key of its messages in the trace's `prompts`."""
    task: NotRequired[int]
    """A plan run: the task the branch ran for."""
    round: NotRequired[int]
    """A plan run: the round of that task."""


class Match(TypedDict):
    """One match of a speculative run's judge tournament (logic/speculation.py `match_result`)."""

    first: str
    second: str
    winner: str
    loser: str
    clear: bool
    """Both orders of asking chose the same candidate."""
    why: str
    verdicts: list[str | None]
    """The letter chosen with `first` shown as A, then with `second` shown as A (None: failed)."""


class CandidateSummary(TypedDict):
    """One candidate as a speculative run's verification reports it (nodes/pick.py)."""

    id: str
    approach: str | None
    temperature: float | None
    status: str
    result: str | None
    why: str
    check: CheckResult | None
    refused: NotRequired[str]
    reused: NotRequired[bool]


class SpeculationReport(TypedDict):
    """How a speculative run picked its answer: `verification["speculation"]` (nodes/pick.py)."""

    by: str
    """check or judge."""
    winner: str
    status: str
    reason: str
    matches: list[Match]
    candidates: list[CandidateSummary]


class EditCandidate(TypedDict, total=False):
    """One candidate patch of a speculative edit task (logic/speculative_edit.py)."""

    id: str
    approach: str
    hint: str
    temperature: float
    branch: str
    commit: str | None
    check: CheckResult | None
    result: str
    """won, passed, failed, lost or cancelled."""
    why: str
    files: list[str]
    refused: list[str]
    status: str
    conversation: str | None
    """Where its conversation is kept (runtime/storage/edit_conversations.py)."""


class TaskEdit(TypedDict, total=False):
    """What an edit task changed: its branch, commit and files (a speculative one's candidates)."""

    branch: str | None
    base: str
    commit: str | None
    files: list[str]
    writes: list[str]
    refused: list[str]
    candidates: list[EditCandidate]


class TraceTask(TypedDict):
    """A plan task's record in one round (logic/plan_tasks.py), its branches named by id."""

    id: int
    round: int
    kind: str
    goal: str
    deps: list[int]
    optional: bool
    key: str
    fingerprint: str
    status: str
    reason: str
    output: str
    finished_at: float
    branch_ids: list[str]
    started_at: NotRequired[float]
    seconds: NotRequired[float]
    cause: NotRequired[str]
    trace_id: NotRequired[str]
    mode: NotRequired[str | None]
    confidence: NotRequired[float | None]
    vote_counts: NotRequired[dict[str, int]]
    verification: NotRequired[dict[str, Any]]
    edit: NotRequired[TaskEdit]
    reused_from_round: NotRequired[int]


class EditConversation(TypedDict):
    """An edit candidate's conversation (logic/edit_agent.py): its first prompt and its steps."""

    messages: list[Message]
    steps: list[dict[str, Any]]


class Outcome(TypedDict, total=False):
    """Whether a run met its target (logic/run_record.py): all three keys, or none without one."""

    target: str
    correct: bool
    scorer: str


class TraceRecord(TypedDict):
    """One run's trace (nodes/record_trace.py), redacted, under its id in ("traces", tenant)."""

    trace_id: str
    tenant: str
    created_at: str
    task_preview: str
    """The task's first 200 characters."""
    task_chars: int
    task: NotRequired[str]
    """The whole task, when longer than its preview and within PARALLAX_TRACE_PROMPT_CHARS."""
    follow_up: NotRequired[AskedFollowUp]
    question: str
    mode: str | None
    status: str | None
    answer: str
    reason: str
    votes: list[VoteCount]
    output_schema: NotRequired[JsonSchema]
    data: NotRequired[dict[str, Any] | None]
    provenance: NotRequired[list[Provenance]]
    verification: NotRequired[dict[str, Any]]
    """What the merge checked (typed, speculate and plan runs)."""
    confidence: float | None
    failed_branches: list[str]
    objection: str
    playbook: str
    playbook_version: int
    thread_id: str | None
    duration_ms: float | None
    served: dict[str, ServedVersion]
    target: NotRequired[str]
    """The right answer, given with the run or by a person; `correct`: whether it was met."""
    correct: NotRequired[bool]
    scorer: NotRequired[str]
    feedback: list[FeedbackEntry]
    spend: NotRequired[Spend]
    vote_plan: NotRequired[dict[str, Any]]
    max_cost: NotRequired[float]
    max_tokens: NotRequired[int]
    prompts: dict[str, list[Message]]
    """prompt key -> the messages branches were sent (logic/run_record.py `kept_prompts`)."""
    prompts_omitted: NotRequired[str]
    branches: list[TraceBranch]
    plan: NotRequired[dict[str, Any]]
    plans: NotRequired[list[dict[str, Any]]]
    tasks: NotRequired[list[TraceTask]]
    tokens: TokenTotals
    user: NotRequired[str]
    """The user below the tenant whose run it is (runtime/storage/trace_store.py)."""
    edit_conversations: NotRequired[dict[str, EditConversation]]
    """Never stored: `parallax export` puts a plan run's kept conversations here."""


class LetterRetry(TypedDict):
    """One `parallax dlq retry` of a dead letter."""

    at: str
    status: str
    attempts: int
    error: str
    transitions: list[Transition]


class LetterResult(TypedDict):
    """What a retry that succeeded replied."""

    output: dict[str, Any] | None
    vote: str | None


class DeadLetter(TypedDict):
    """An escalated business branch with its input, for `parallax dlq retry` (("dlq", tenant))."""

    id: str
    trace_id: str
    """The run's trace, or the plan's when the run was one of its tasks."""
    tenant: str
    kind: BranchKind
    input: dict[str, Any] | None
    """What the branch was asked (`BranchRecord.input`), as given: not redacted."""
    error: str
    """Its last error, redacted."""
    attempts: int
    escalated_at: str
    status: str
    """open, or resolved by a retry."""
    retries: list[LetterRetry]
    result: NotRequired[LetterResult]


def as_trace(value: Mapping[str, Any], trace_id: str | None = None) -> TraceRecord:
    """A stored trace read back (`trace_id`: the key it was stored under, set on it)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"a stored trace is a JSON object, not {type(value).__name__}")
    found = {**value, "trace_id": trace_id} if trace_id is not None else dict(value)
    return cast(TraceRecord, found)
