"""What travels between nodes, typed: branch specs, `Send` payloads, items, provenance, records.

TypedDicts, not pydantic models: they live in the checkpoint and cross `Send` as plain dicts.
Model replies are parsed into state/payloads.py's models instead.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, cast

from typing_extensions import TypedDict

from parallax.state.lifecycle import BranchState, Transition
from parallax.state.payloads import BranchRecord, BranchStatus
from parallax.state.vocabulary import BranchKind, BusinessKind

JsonSchema = dict[str, Any]
"""A JSON Schema object: the user's output schema, what every branch is asked for, what the merge
votes on or assembles field by field and what `data` is checked against (logic/user_schema.py)."""


class PlaybookItemData(TypedDict, total=False):
    """A playbook item as it travels (`PlaybookItem.model_dump()`, state/playbook.py): into a run's
    `playbook_items`, its per-branch selections and each branch's prompt."""

    id: Required[str]
    text: Required[str]
    section: str
    helpful: int
    harmful: int
    provenance: list[str]
    about: list[str]
    created_in: int
    changed_in: int
    status: Literal["active", "archived"]


class PromptText(TypedDict):
    """The two texts of a prompt template, with `$placeholders` (prompts/templates.py)."""

    system: str
    user: str


class PromptVersion(PromptText, total=False):
    """A stored (served) prompt version (runtime/storage/prompt_store.py); version 0 is the
    template's default. A gate evaluation may hand a run just {"version", "system", "user"}."""

    name: str
    version: int
    parent: int | None
    created_by: str
    created_at: str
    gate: dict[str, Any]
    note: str
    arm: str
    """As served to a run: production, canary, head or pinned (logic/releases.py)."""
    release_id: str | None
    """As served to a run: the gray release it was served by, if any."""


class ServedVersion(TypedDict, total=False):
    """Which version of a versioned subject ("playbook/<name>", "prompt/<name>") a run was
    served."""

    version: int
    arm: str
    release_id: str | None


class BranchAsk(TypedDict):
    """What a business branch's prompt is built from: its own text, the question and its lessons
    (plus, for a slice, its place in the document and the shared brief)."""

    kind: BusinessKind
    text: str
    question: str
    playbook: list[PlaybookItemData]
    index: NotRequired[int]
    total: NotRequired[int]
    brief: NotRequired[str]


class BranchSpec(BranchAsk):
    """One business branch as the fan-out plans it (logic/branch_plans.py `branch_specs`) and `work`
    runs it."""

    id: str
    parent_id: str
    """The run's trace id."""
    planned_at: float
    model: str
    temperature: float
    prompt: NotRequired[PromptVersion | None]
    """A dead letter's own prompt version (`dlq retry`); a planned branch uses the run's served one.
    """
    output_schema: NotRequired[JsonSchema]
    """A dead letter's output schema (`dlq retry`); a planned branch gets the run's in its
    `WorkTask`."""


class BranchInput(TypedDict, total=False):
    """What an escalated branch was asked (`BranchRecord.input`): enough for `dlq retry` to ask it
    again."""

    kind: BusinessKind
    text: str
    question: str
    playbook: list[PlaybookItemData]
    model: str
    temperature: float
    index: int
    total: int
    brief: str
    prompt: PromptVersion | None
    output_schema: JsonSchema


class RunMeta(TypedDict):
    """What every model call of a run tells the callbacks (LangSmith): its trace id and versions."""

    parallax_trace_id: str | None
    tenant: str
    playbook: str
    playbook_version: int
    playbook_arm: str
    prompt_versions: dict[str, int]


class Spend(TypedDict):
    """A run's (or trace's) spend (logic/spend.py): `cost_usd` None when a branch's model has no
    price (`unpriced` names those models)."""

    tokens: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    cost_usd: float | None
    unpriced: list[str]


class Limits(TypedDict, total=False):
    """A run's budget (logic/budget.py); either may be absent."""

    max_cost: float
    """USD, all model calls of the run together."""
    max_tokens: int
    """Tokens (prompt plus completion), all model calls of the run together."""


class BudgetSpec(Limits, total=False):
    """What a fan-out gives its tasks: the run's limits, the key of its live tally and what the
    state says was spent."""

    key: str
    spent_tokens: int
    spent_cost: float
    unpriced: list[str]


class WorkShared(TypedDict):
    """What the fan-out gives every group of branches alike."""

    fan_out: str
    """The fan-out's name: its groups share one call limit and watches by it (runtime/services.py).
    """
    prompts: dict[str, PromptVersion]
    """The served prompt version of each branch kind: prompt name -> version."""
    meta: RunMeta
    output_schema: NotRequired[JsonSchema]
    """The user's schema, when the run has one: every branch of the group is asked for that object.
    """
    vote_watch: NotRequired[VoteWatchSpec]
    """An adaptive vote's wave: what its votes in flight are cancelled by once it settles
    (logic/vote_watch.py)."""
    budget: NotRequired[BudgetSpec]
    """The run's budget, when it has one: each branch is checked against it before it starts
    (logic/budget.py)."""


class VoteWatchSpec(TypedDict):
    earlier: list[str]
    """Final values of the valid votes of earlier waves."""
    threshold: float
    min_leader: int


class WorkTask(WorkShared):
    """The payload of one `Send("work", ...)`: a group of business branches and what they share."""

    branches: list[BranchSpec]


class SafetyTask(TypedDict):
    """The payload of `Send("safety", ...)`: the full input, screened beside the business
    branches."""

    trace_id: str
    text: str


class Provenance(TypedDict):
    """Where one leaf value of a typed run's `data` comes from (the output key `provenance`)."""

    path: str
    """`revenue`, `address.city`, or `segments[0]` for an item of a list."""
    value: Any
    branch_id: str | None
    quote: str | None
    """The words of the source the value rests on (section runs); None for direct and vote runs."""
    page: int | None
    """The page the quote is on, from 1, when the input had pages."""
    verified: bool
    """Section: the quote occurs in its slice; vote: the field reached its quorum; direct: False."""
    slice_index: NotRequired[int]
    conflict: NotRequired[bool]
    """Section: one of two verified values two slices gave for one scalar (the run needs review)."""
    support: NotRequired[int]
    """Vote: how many votes gave this value."""
    asked: NotRequired[int]
    """Vote: how many votes were asked for."""


class TokensData(TypedDict):
    prompt: int
    completion: int
    total: int
    cached_tokens: NotRequired[int]
    """Of `prompt`, the tokens the endpoint read from its prefix cache (absent in older records)."""


class CheckResult(TypedDict, total=False):
    """A check's or a test command's result (runtime/check_folders.py `run_check`)."""

    passed: bool
    exit: int | None
    timed_out: bool
    output: str
    passed_tests: int
    failed_tests: int
    finished_at: float
    seconds: float
    sandbox: str
    """Where it ran (runtime/sandbox.py)."""


class Speculation(TypedDict, total=False):
    """A speculative candidate's part of its branch record (nodes/candidate.py): its approach, its
    check and how it fared."""

    approach: str
    hint: str
    temperature: float
    model: str | None
    index: int
    check: CheckResult | None
    result: str
    """won, passed, failed, lost or cancelled ("" until decided)."""
    why: str
    refused: str
    """Why its answer could not be checked (its folder, or a write outside it)."""
    reused: bool
    """Made before a resume: not asked again."""


class BranchFields(TypedDict):
    """Every field of `payloads.BranchRecord` but `input`: a branch as a stored trace keeps it
    (state/trace_record.py `TraceBranch`)."""

    id: str
    parent_id: str
    kind: BranchKind
    status: BranchStatus
    attempts: int
    reasks: int
    latency_ms: float
    tokens: TokensData
    cost_usd: NotRequired[float | None]
    output: dict[str, Any] | None
    error: str | None
    cause: NotRequired[str | None]
    model: str | None
    temperature: float | None
    slice_index: int | None
    vote: str | None
    playbook_item_ids: list[str]
    state: BranchState | None
    transitions: list[Transition]
    backup: dict[str, Any] | None
    prompt: dict[str, Any] | None
    budget_seen: NotRequired[dict[str, Any] | None]
    speculation: NotRequired[Speculation | None]


class BranchRecordData(BranchFields):
    """`payloads.BranchRecord.model_dump()`: a branch's trace as the state's `branches` keeps it."""

    input: dict[str, Any] | None


def branch_data(record: BranchRecord) -> BranchRecordData:
    """A branch record as the state's `branches` keeps it."""
    return cast(BranchRecordData, record.model_dump())


class CandidateSpec(TypedDict):
    """One speculative candidate as the fan-out plans it: its own approach (a prompt variant and a
    temperature)."""

    id: str
    parent_id: str
    planned_at: float
    index: int
    text: str
    question: str
    playbook: list[PlaybookItemData]
    model: str
    temperature: float
    approach: str
    """The approach's name (logic/speculation.py APPROACHES)."""
    hint: str
    """What the approach tells the model, put into its prompt."""


class CheckSpec(TypedDict):
    """How each candidate of a speculative run is checked (all empty: no check, a judge compares
    them)."""

    command: str
    file: str
    repo: str
    timeout_s: float


class CandidateTask(TypedDict):
    """The payload of one `Send("candidate", ...)`: one candidate, its check and what the run
    shares."""

    fan_out: str
    """The fan-out's name (runtime/services.py `new_fan_out`): its candidates share a call limit and
    a watch."""
    candidate: CandidateSpec
    check: CheckSpec
    tenant: str
    prompts: dict[str, PromptVersion]
    meta: RunMeta
    budget: NotRequired[BudgetSpec]
    """The run's budget, when it has one: the candidate is checked against it before it starts
    (logic/budget.py)."""


class ReflectedRun(TypedDict):
    """The stored run a learn task reflects on as it happened (logic/trace_signal.py)."""

    trace_id: str
    status: str | None
    answer: str
    correct: bool
    feedback: str
    scorer: str
    """The signal it was judged by: target, feedback or status."""
    used_item_ids: list[str]


class TaskData(TypedDict, total=False):
    """A training or validation task as the learn graph passes it on: a `TrainingTask` as a plain
    dict, or a stored run's (logic/trace_signal.py), which carries its signal and the run."""

    id: str
    input: str
    target: Any
    scorer: str | None
    signal: str
    run: ReflectedRun


class LearnTask(TypedDict):
    """The payload of one `Send("learn_from_task", ...)`: a group of training tasks and the playbook
    head they learn from (nodes/schedule.py `dispatch`)."""

    tasks: list[TaskData]
    """Training tasks: {"id", "input", "target"} (logic/task_files.py)."""
    items: list[PlaybookItemData]
    version: int
    mode: str
    tenant: str
    prompts: dict[str, PromptVersion]
    """The reflect, curate and solve prompt versions this learn run uses."""
    fan_out: str
    """The batch's name: its groups share one call limit by it (runtime/services.py)."""
    votes: NotRequired[int]
    """The most votes a vote of these runs asks."""
    budget: NotRequired[BudgetSpec]
    """The learn run's budget, when it has one: every request of these tasks is held against it
    (logic/budget.py)."""
