"""State of the `learn` graph: batches of runs, their reflections and operations, the gate.

`runs` is written by parallel per-task branches; its reducer appends, and a `None` write clears it
when the next batch starts, so a batch never sees the previous one's runs.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired, cast

from pydantic import Field, with_config
from typing_extensions import TypedDict

from parallax.state.inputs import (
    CALLER,
    Answer,
    CostBudget,
    Fraction,
    Id,
    InputText,
    LeaseSeconds,
    Name,
    Since,
    TokenBudget,
    Votes,
)
from parallax.state.records import PromptVersion, TaskData
from parallax.state.solve import Scorer
from parallax.state.vocabulary import Mode

MAX_TASKS = 10_000
"""The most training (or validation) tasks one learn run takes, and the most stored runs it learns
from."""
MAX_EPOCHS = 100
"""The most passes over the training tasks."""
MAX_BATCH = 1000
"""The most tasks run (and reflected on) in parallel per update."""
MAX_TASK_RUNS = 100_000
"""The most training tasks one learn run solves in all (tasks times epochs)."""


def batch_runs(
    left: list[dict[str, Any]] | None, right: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    return [] if right is None else (left or []) + right


class GraphSpend(TypedDict):
    """What a learn (or loop) run's model calls spent so far: tokens, USD of the priced ones, models
    without a price."""

    tokens: int
    cost_usd: float
    unpriced: list[str]


def add_spend(left: GraphSpend | None, right: GraphSpend | None) -> GraphSpend:
    """Spend written by parallel nodes adds up."""
    a = left or {"tokens": 0, "cost_usd": 0.0, "unpriced": []}
    b = right or {"tokens": 0, "cost_usd": 0.0, "unpriced": []}
    return {
        "tokens": a["tokens"] + b["tokens"],
        "cost_usd": round(a["cost_usd"] + b["cost_usd"], 10),
        "unpriced": sorted({*a["unpriced"], *b["unpriced"]}),
    }


def first_said(left: str | None, right: str | None) -> str:
    """The first reason given stands (parallel branches may each give one)."""
    return left or right or ""


def validation_sample(state: LearnState) -> list[TaskData]:
    """The same first `val_size` validation tasks for every gate of the run."""
    tasks = cast(list[TaskData], state.get("val_tasks") or [])
    return tasks[: state.get("val_size", 50)]


@with_config(CALLER)
class TrainingTask(TypedDict):
    """One training or validation task as a caller sends it (logic/task_files.py reads a JSONL line
    into one)."""

    input: Annotated[InputText, Field(min_length=1)]
    """The task's text (its length is also held to the run's PARALLAX_MAX_INPUT_CHARS when it runs).
    """
    target: NotRequired[Answer | int | float | None]
    """The right answer, when known."""
    scorer: NotRequired[Scorer | None]
    id: NotRequired[Id]


Tasks = Annotated[list[TrainingTask], Field(max_length=MAX_TASKS)]


@with_config(CALLER)
class LearnInput(TypedDict):
    """What a caller sends: training tasks (or `from_traces`) and how to learn from them; each field
    with its type and bounds, logic/graph_inputs.py `validate_learn_input` for what holds between
    them (tasks times epochs).
    """

    tasks: NotRequired[Tasks]
    """Training tasks: {"id", "input", "target"} (see parallax/logic/task_files.py for the file
    format); leave out with `from_traces`."""
    from_traces: NotRequired[bool]
    """Learn from the tenant's stored runs of this playbook instead of tasks: each run's target,
    else its feedback, else its status is the signal (logic/trace_signal.py); runs without one are
    skipped, and no run teaches the playbook twice (runtime/storage/consumed.py). Runs that carry a
    target are the gate's validation tasks, replayed, unless `val_tasks` are given."""
    since: NotRequired[Since]
    """With `from_traces`: only runs this recent (7d, 12h, 30m, 2w, or an ISO date)."""
    limit: NotRequired[Annotated[int, Field(ge=1, le=MAX_TASKS)]]
    """With `from_traces`: the most runs to learn from (oldest first); with tasks, the first N
    tasks."""
    lease_s: NotRequired[LeaseSeconds]
    """With `from_traces`: seconds a claim on runs lasts if this learn run dies before consuming
    them (1800)."""
    ties_to_canary: NotRequired[bool]
    """A candidate the gate finds not worse but not measurably better passes ("not worse offline"),
    because a canary judges it on live runs next; the loop sets it (logic/loop.py). Otherwise such a
    tie needs `approve`."""
    val_tasks: NotRequired[Tasks]
    batch: NotRequired[Annotated[int, Field(ge=1, le=MAX_BATCH)]]
    epochs: NotRequired[Annotated[int, Field(ge=1, le=MAX_EPOCHS)]]
    val_size: NotRequired[Annotated[int, Field(ge=1, le=MAX_TASKS)]]
    playbook: NotRequired[Name]
    tenant: NotRequired[Name]
    """Whose playbooks this run reads and writes (default "default"); no other tenant's are
    reachable."""
    approve: NotRequired[bool]
    mode: NotRequired[Mode]
    """Solve mode of the runs; default `direct` (one call per task)."""
    votes: NotRequired[Votes]
    """The most votes a vote of these runs asks (default: the solve graph's, 5)."""
    margin: NotRequired[Fraction]
    max_cost: NotRequired[CostBudget]
    max_tokens: NotRequired[TokenBudget]
    """The run's budget (USD; tokens), every model call of its runs, reflections, curations and
    gates together: each request is held against it before it is sent (logic/budget.py); once
    reached, no further batch starts."""


class LearnOutput(TypedDict):
    playbook: str
    tenant: str
    learn_run_id: str
    from_version: int
    to_version: int
    accepted: bool
    batches: Annotated[list[dict[str, Any]], operator.add]
    val_accuracy_before: float | None
    val_accuracy_after: float | None
    spend: Annotated[GraphSpend, add_spend]
    """What this run's model calls spent (each node adds its own)."""
    budget_stop: Annotated[str, first_said]
    """Why the run's budget stopped it, or cut some of its runs short ("" or absent: it did not)."""
    traces: dict[str, Any]
    """With `from_traces`: runs considered, skipped (no signal, taken, put off after failed
    reflections: `waiting`), claimed, by signal, consumed, released to retry (`to_retry`), given up
    as unlearnable after failed reflections (`unlearnable`), and left to another round that claimed
    them after this run's claim expired (`dropped`)."""


# `playbook` and `tenant`, which a caller may leave out, are always in the output: one channel,
# "optional in, required out", which a TypedDict cannot say, so a type checker sees conflicting
# bases.
class LearnState(LearnInput, LearnOutput, total=False):  # type: ignore[misc]
    batch_index: int
    """The batch under way (-1 before the first): logic/learn_schedule.py `batch_of` says which
    tasks it holds."""
    runs: Annotated[list[dict[str, Any]], batch_runs]
    head_version: int
    head_accuracy: float | None
    head_results: dict[str, bool]
    """Per validation task id, whether the head got it right (the gate's paired comparison)."""
    prompts: dict[str, PromptVersion]
    """The reflect and curate prompt versions this learn run uses (production, else head)."""
    candidate: dict[str, Any]
    decision: dict[str, Any]
