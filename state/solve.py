"""State of the `solve` graph: input, internal and output schemas.

Parallel branches write only `branches`, whose reducer merges records by id, so a branch re-run
after a resume replaces its own record instead of adding a second vote.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from langgraph.types import Overwrite
from pydantic import Field, with_config
from typing_extensions import TypedDict

from parallax.state.inputs import (
    CALLER,
    Answer,
    CheckFile,
    CostBudget,
    Document,
    InputText,
    JsonObject,
    Name,
    PathText,
    TokenBudget,
    Votes,
)
from parallax.state.records import (
    BranchRecordData,
    PlaybookItemData,
    PromptVersion,
    Provenance,
    ServedVersion,
    Spend,
)
from parallax.state.vocabulary import Mode, Route

Status = Literal["ok", "needs_review", "failed"]
Scorer = Literal["auto", "numeric", "exact", "contains"]
"""How a run's answer is compared with its target (logic/scoring.py)."""
MAX_CANDIDATES = 10
"""The most candidates a speculative run makes at once."""
MAX_PAGES = 10_000
"""The most pages a caller may send as `pages` (their text together is bounded by
PARALLAX_MAX_INPUT_CHARS)."""
INTERNAL = frozenset(
    {"follow_up", "parent_trace", "playbook_items", "playbook_version", "prompt_overrides"}
)
"""SolveInput keys that Parallax's own graphs set when they run this one in process (the chat
graph's follow-up, a plan's tasks, a gate's evaluation): what they carry (a branch record, lessons,
prompts, another run's trace) is trusted as it is, so a caller of any face may not send them
(logic/run_input.py refuses them by name)."""


def merge_branches(
    left: list[BranchRecordData] | None, right: list[BranchRecordData] | BranchRecordData
) -> list[BranchRecordData]:
    """Append branch records, replacing any earlier record with the same id (order kept).
    A new run on a thread that ran before starts over with LangGraph's `Overwrite` (see NEW_RUN)."""
    merged = list(left or [])
    new: list[BranchRecordData] = [right] if isinstance(right, dict) else list(right)
    index = {record["id"]: i for i, record in enumerate(merged)}
    for record in new:
        if record["id"] in index:
            merged[index[record["id"]]] = record
        else:
            index[record["id"]] = len(merged)
            merged.append(record)
    return merged


class FollowUp(TypedDict):
    """A chat follow-up this run's task was condensed from (the chat graph's `condense_turn`)."""

    asked: str
    """The follow-up as the person wrote it."""
    earlier_turns: int
    """How many earlier exchanges the condense call was shown (logic/conversation.py bounds them).
    """
    condense: BranchRecordData
    """The condense call's record: kept with the run's branches, so its trace shows it and `parallax
    stats` counts it."""


@with_config(CALLER)
class SolveInput(TypedDict):
    """What a caller sends: the task text (or a document) and how to run it; each field with its
    type and bounds (state/inputs.py), the keys in INTERNAL only from Parallax's own graphs. What
    depends on the run's settings (the task's size: PARALLAX_MAX_INPUT_CHARS) or on other fields
    (min_votes <= votes) is logic/routing.py's `validate`.
    """

    task: NotRequired[InputText]
    """The text to work on; may be left out when `document` or `pages` gives it."""
    document: NotRequired[Document]
    """A document to work on instead of `task`: a file path, raw bytes, or {"name", "base64"}; PDF,
    DOCX, HTML, Markdown or text (runtime/documents.py). A PDF keeps its pages, so values are placed
    on them."""
    pages: NotRequired[Annotated[list[InputText], Field(max_length=MAX_PAGES)]]
    """The text of each page, page 1 first, when the caller has read the document already (the CLI
    does)."""
    output_schema: NotRequired[JsonObject]
    """A JSON Schema of an object: what every branch is asked for, what the merge votes on or
    assembles field by field, and what `data` holds (logic/user_schema.py)."""
    question: NotRequired[InputText]
    mode: NotRequired[Mode]
    votes: NotRequired[Votes]
    min_votes: NotRequired[Votes]
    red_team: NotRequired[bool]
    candidates: NotRequired[Annotated[int, Field(ge=1, le=MAX_CANDIDATES)]]
    """Speculate mode: how many candidates are made at once, each with its own approach (default 3).
    """
    check: NotRequired[PathText]
    """Speculate mode: a command run in each candidate's own folder (its answer saved there as
    `check_file`); exit 0 passes. The first candidate that passes wins and the others are cancelled.
    Without it, a judge compares them."""
    check_file: NotRequired[CheckFile]
    """Speculate mode: where a candidate's answer is saved for the check, relative to its folder
    (default candidate.txt)."""
    repo: NotRequired[PathText]
    """A git repository. Speculate: each candidate's folder is a worktree of its HEAD. Plan: the
    repository edit tasks change, each in its own worktree (nothing else is written)."""
    playbook: NotRequired[Name]
    tenant: NotRequired[Name]
    """Whose playbooks the run reads (default "default"); no other tenant's are reachable."""
    playbook_items: NotRequired[list[PlaybookItemData]]
    """Use these items instead of the stored head (gate evaluation of a candidate, `eval
    --version`)."""
    playbook_version: NotRequired[int]
    """The version those items are (reported back as is)."""
    target: NotRequired[Answer]
    """The right answer, when the caller knows it: the trace keeps whether the run got it (accuracy
    in `parallax stats`)."""
    scorer: NotRequired[Scorer]
    """How `target` is compared: auto | numeric | exact | contains (parallax/logic/scoring.py)."""
    prompt_overrides: NotRequired[dict[str, PromptVersion]]
    """Use these prompt versions ({name: {"version", "system", "user"}}) instead of the served ones
    (gate evaluations)."""
    follow_up: NotRequired[FollowUp]
    """Set by the chat graph when `task` is a follow-up rewritten to stand alone: the trace keeps
    what was asked and the rewrite's model call (among the branches). Like every input it stays on a
    thread until sent again."""
    max_cost: NotRequired[CostBudget]
    """The run's budget in USD, all its model calls together (at the price table:
    runtime/prices.py). Each request is held at its worst case before it is sent, shrunk or not
    sent, so the run never spends past it; stopped, it ends `needs_review` with "budget reached" and
    what it has (logic/budget.py)."""
    max_tokens: NotRequired[TokenBudget]
    """The run's budget in tokens (prompt plus completion, all its model calls together), checked as
    `max_cost` is. Not the per-reply cap, which is the Context's `max_tokens` (PARALLAX_MAX_TOKENS).
    """
    parent_trace: NotRequired[str]
    """The trace of the run this one is part of (a plan's task, or its direct answer). That trace
    keeps this run's branches, so this run stores no trace of its own (`parallax stats` counts the
    plan once); its dead letters name the parent trace."""


class RunOutput(TypedDict):
    """What every run gives back, whatever its graph (solve, plan); `mode` is each graph's own."""

    answer: str
    status: Status
    confidence: float
    reason: str
    branches: Annotated[list[BranchRecordData], merge_branches]
    vote_counts: dict[str, int]
    """A vote's tally: normalised answer -> votes (`votes` is the input: how many to ask)."""
    failed_branches: list[str]
    objection: str
    trace_id: str
    playbook_version: int
    verification: dict[str, Any]
    """What the merge checked: `rules` (vote quorum) or `facts` (section findings whose quotes
    verify)."""
    spend: Spend
    """What the run spent: tokens and their cost in USD (None with the models that have no price:
    logic/spend.py)."""
    note: str
    """What every face says beside the answer: that the embedded toy model answered
    (runtime/model_note.py), else ""."""


NEW_RUN: dict[str, Any] = {
    "branches": Overwrite([]),
    "failed_branches": [],
    "objection": "",
    "answer": "",
    "reason": "",
    "verification": {},
    "budget_stop": "",
}
"""The keys a run starts from (RunOutput's, and the budget's stop). A thread keeps its state between
runs (a Studio conversation, an API thread), so without these a second run on it would count the
first one's branches and report its answer, objection and checks (`Overwrite` empties the branches
past their reducer)."""


class SolveOutput(RunOutput):
    """What a caller gets back (see the CLI contract in docs/cli.md)."""

    mode: Route
    votes_asked: int
    """A vote: how many votes were asked (an adaptive vote stops early; cancelled ones are not
    counted)."""
    stop_reason: str
    """A vote: why it asked no more (settled, the most votes, or it could not settle)."""
    vote_plan: dict[str, Any] | None
    """An adaptive vote: its waves (first_wave, min_wave), their expected cost per question, the
    plans it was chosen against and what they were priced on (logic/vote_pricing.py); None for other
    runs."""
    data: dict[str, Any] | None
    """With an `output_schema`: the object the run settled on (valid against the schema when `ok`),
    else None."""
    provenance: list[Provenance]
    """With an `output_schema`: one record per value: `path`, `value`, `branch_id`, `quote`, `page`
    (from 1, when the input had pages) and `verified` (the quote occurs in its slice; for a vote,
    the field's quorum)."""


# One channel per key, whatever the direction: the input's `mode` (a Mode, "auto" included) is the
# output's (the Route taken), and `playbook_version`, which a caller may leave out, is always in the
# output. A TypedDict cannot say "optional in, required out" or "wider in, narrower out", so a type
# checker sees conflicting bases.
class SolveState(SolveInput, SolveOutput, total=False):  # type: ignore[misc]
    """Everything the nodes share while a run is under way."""

    slices: list[str]
    slice_pages: list[list[int]]
    """Per slice, the pages (from 1) its text comes from, when the input had pages."""
    playbook_selections: list[list[PlaybookItemData]]
    """Per branch text (one per slice, else one), the playbook items that branch sees."""
    leader: str
    consensus: bool
    next_wave: int
    """An adaptive vote between waves: how many more votes the merge asks for (0: none)."""
    started_at: float
    """Unix time the run started (the trace's duration)."""
    thread_key: str
    """The thread id (or, without one, the trace id): what the gray release hashes to pick a
    version."""
    served: dict[str, ServedVersion]
    """Per versioned subject ("playbook/<name>", "prompt/<name>"): {"version", "arm", "release_id"}.
    """
    budget_stop: str
    """Why the budget stopped a wave, the judge or the red team from being asked ("" or absent: it
    did not)."""
    prompts: dict[str, PromptVersion]
    """The prompt version each branch kind is built from: name -> {"name", "version", "system",
    "user", ...}."""
