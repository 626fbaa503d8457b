"""The plan of a `plan` run and the graph state its tasks share.

The plan is untrusted model output, so its payloads are pydantic. Tasks write three reducer
channels: `tasks` (one record per task and round, replaced on a re-run), `board` (results under a
key, by the plan's board policy) and `branches`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, Field, field_validator, with_config
from typing_extensions import TypedDict

from parallax.state.inputs import CALLER, JsonObject, PathText
from parallax.state.records import BudgetSpec
from parallax.state.solve import RunOutput, SolveInput
from parallax.state.vocabulary import TASKS, TaskKind

Synthesis = Literal["concat", "reduce", "vote", "assembly"]
BoardPolicy = Literal["append", "keep_both", "conflict"]
TaskStatus = Literal["PENDING", "RUNNING", "DONE", "NEEDS_REVIEW", "FAILED", "SKIPPED"]
FINISHED = ("DONE", "NEEDS_REVIEW")
"""Task states whose output dependants may use."""
PLAN_TASKS = 20
PLAN_TEXT_CHARS = 200
PLAN_LIST_ITEMS = 10
"""Bounds of the planner's reply, in its JSON Schema only (as a vote's reply is bounded,
state/payloads.py): an endpoint that turns the schema into a grammar (llama.cpp) cannot let a small
model write one goal, input or template without end; a plan given by a caller, or from an endpoint
that ignores the bounds, is still read, and plan_check.py's limits (PARALLAX_PLAN_MAX_TASKS, default
20 = PLAN_TASKS) decide. A template may be as long as four goals."""
Bounded = Annotated[str, Field(json_schema_extra={"maxLength": PLAN_TEXT_CHARS})]


def _most(items: int) -> Any:
    return {"maxItems": items}


class PlanTask(BaseModel):
    """One step of a plan. `$N` or `${N}` in `goal` or an input stands for task N's result."""

    id: int = Field(ge=1, description="1, 2, 3 ... unique within the plan")
    goal: str = Field(
        json_schema_extra={"maxLength": PLAN_TEXT_CHARS}, description="what this task must produce"
    )
    kind: TaskKind = Field("solve", description="; ".join(f"{k}: {it}" for k, it in TASKS.items()))
    deps: list[int] = Field(
        default_factory=list,
        json_schema_extra=_most(PLAN_TASKS),
        description="ids of the tasks whose results this task needs",
    )
    inputs: dict[str, Bounded] = Field(
        default_factory=dict,
        json_schema_extra={"maxProperties": PLAN_LIST_ITEMS},
        description="named inputs; may hold $N placeholders",
    )
    writes: list[Bounded] = Field(
        default_factory=list,
        json_schema_extra=_most(PLAN_LIST_ITEMS),
        description="files an edit task changes (paths in the repository)",
    )
    optional: bool = Field(False, description="the plan can finish without this task")
    key: str = Field(
        "",
        json_schema_extra={"maxLength": 60},
        description="board key the result is written under (default: the task id)",
    )

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a task goal is empty")
        return value.strip()

    @property
    def board_key(self) -> str:
        return self.key or str(self.id)


class Plan(BaseModel):
    """Reply of the planner: tasks in plan order, and how their results become one answer."""

    tasks: list[PlanTask] = Field(
        json_schema_extra=_most(PLAN_TASKS), description="the tasks, in plan order"
    )
    synthesis: Synthesis = Field(
        "concat",
        description=(
            "concat (plan order), reduce (fold pairwise), "
            "vote (over equivalent tasks), assembly (fill `template`)"
        ),
    )
    template: str = Field(
        "",
        json_schema_extra={"maxLength": 4 * PLAN_TEXT_CHARS},
        description="for assembly: the answer with ${N} where task N's result goes",
    )
    outputs: list[int] = Field(
        default_factory=list,
        json_schema_extra=_most(PLAN_TASKS),
        description="tasks whose results are synthesised (default: those no task depends on)",
    )
    board_policy: BoardPolicy = Field(
        "keep_both",
        description=(
            "when two tasks write one board key: append the "
            "results, keep both, or mark a conflict for the joiner"
        ),
    )
    min_votes: int | None = Field(
        None,
        ge=1,
        description=(
            "for vote synthesis: results that must agree (default: a majority of the outputs)"
        ),
    )

    def task(self, task_id: int) -> PlanTask:
        return next(t for t in self.tasks if t.id == task_id)

    def sinks(self) -> list[int]:
        needed = {d for t in self.tasks for d in t.deps}
        return [t.id for t in self.tasks if t.id not in needed]

    def output_ids(self) -> list[int]:
        return list(self.outputs) or self.sinks()


# --- reducers ----------------------------------------------------------------------------


def merge_tasks(
    left: list[dict[str, Any]] | None, right: list[dict[str, Any]] | dict[str, Any]
) -> list[dict[str, Any]]:
    """Task records by (round, id): a re-run (after a resume) replaces its own record; order kept. A
    new run on a thread that ran before starts over with LangGraph's `Overwrite`
    (nodes/start_plan.py).
    """
    merged = list(left or [])
    new = [right] if isinstance(right, dict) else list(right)
    index = {(r["round"], r["id"]): i for i, r in enumerate(merged)}
    for record in new:
        where = index.get((record["round"], record["id"]))
        if where is None:
            index[(record["round"], record["id"])] = len(merged)
            merged.append(record)
        else:
            merged[where] = record
    return merged


def board_value(policy: str, entries: list[dict[str, Any]]) -> Any:
    """What a key holds under its policy: one value, the joined values, every value, or None (a
    conflict)."""
    values = [e["value"] for e in entries]
    if len(values) == 1:
        return values[0]
    if policy == "append":
        return "\n\n".join(str(v) for v in values)
    if policy == "keep_both":
        return values
    return None


def merge_board(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Board keys written by tasks; order-independent, so two writers in one superstep give one
    result.

    A write is {key: {"policy": ..., "entries": [{"task", "round", "value"}]}}. Entries of one key
    are kept per task (a later round replaces the task's earlier entry) in task order. Two
    tasks on one key follow the policy: `append` joins the values, `keep_both` keeps a list,
    `conflict` keeps both and sets `conflict` for the joiner to resolve (`resolved` then holds
    its choice). `None` as a key's write removes the key; a new run on a thread that ran before
    empties the board with LangGraph's `Overwrite` (nodes/start_plan.py).
    """
    board = dict(left or {})
    for key, write in (right or {}).items():
        if write is None:
            board.pop(key, None)
            continue
        current = board.get(key) or {"policy": write.get("policy", "keep_both"), "entries": []}
        by_task = {e["task"]: e for e in current["entries"]}
        for entry in write.get("entries", []):
            seen = by_task.get(entry["task"])
            if seen is None or entry.get("round", 0) >= seen.get("round", 0):
                by_task[entry["task"]] = entry
        entries = sorted(by_task.values(), key=lambda e: e["task"])
        policy = write.get("policy") or current["policy"]
        merged = {
            "policy": policy,
            "entries": entries,
            "value": board_value(policy, entries),
            "conflict": policy == "conflict" and len(entries) > 1,
        }
        resolved = write.get("resolved", current.get("resolved"))
        if resolved is not None and merged["conflict"]:
            merged.update(resolved=resolved, value=resolved.get("value"))
        board[key] = merged
    return board


# --- graph state -------------------------------------------------------------------------


PlanMode = Literal["auto", "plan"]
MAX_REPLANS = 5
"""The most new plans the joiner of one run may ask for."""


# `mode` is narrower than the solve input's (a TypedDict may not say so: a type checker sees a
# conflict).
@with_config(CALLER)
class PlanInput(SolveInput, total=False):
    """What a caller sends: the request (`task`, or `question` about the document in `task`) and
    options; the solve input's fields (and bounds) and the plan's own. logic/routing.py's
    `validate_plan_input` says what else holds.
    """

    mode: PlanMode  # type: ignore[misc]
    plan: JsonObject
    """A plan to run instead of asking the planner (checked the same way; a bad one is refused)."""
    max_replans: Annotated[int, Field(ge=0, le=MAX_REPLANS)]
    """How often the joiner may ask for a new plan (default 1); an identical replan stops at once.
    """
    test_command: PathText
    """Command an edit task may run in its worktree (its `test` tool), e.g. `python -m pytest -q`.
    """


class PlanOutput(RunOutput):
    """What a caller gets back: the solve output's keys plus the plan, its tasks, board and
    checks."""

    mode: str
    plan: dict[str, Any]
    tasks: Annotated[list[dict[str, Any]], merge_tasks]
    board: Annotated[dict[str, Any], merge_board]


# One channel per key, whatever the direction: the input's `mode` (a solve Mode) is the output's
# ("plan" or "auto"), and `plan` and `playbook_version`, which a caller may leave out, are always in
# the output. A TypedDict cannot say "optional in, required out" or "wider in, narrower out", so a
# type checker sees conflicting bases.
class PlanState(PlanInput, PlanOutput, total=False):  # type: ignore[misc]
    """Everything the plan nodes share."""

    request: str
    document: str
    budget_stop: str
    """Why the budget stopped a task or a replan from being started ("" or absent: it did not)."""
    round: int
    planned: bool
    """False when no valid plan could be made (the run then answers directly)."""
    plan_error: str
    plans: list[dict[str, Any]]
    """Every plan of the run, in order (the joiner compares a replan with the one before)."""
    decision: str
    """The joiner's last decision: "finish" or "replan"."""
    stop: str
    """Why no further plan will be made (an identical or invalid replan); the joiner then finishes.
    """
    repo_base: str
    """The commit every edit task's worktree starts from."""


class TaskPayload(TypedDict):
    """What one `run_task` Send carries: its task, the plan around it and the run's settings."""

    task: dict[str, Any]
    plan: dict[str, Any]
    round: int
    trace_id: str
    request: str
    document: str
    tenant: str
    playbook: str
    votes: int
    min_votes: NotRequired[int]
    repo: NotRequired[str]
    repo_base: NotRequired[str]
    test_command: NotRequired[str]
    candidates: NotRequired[int]
    """Above 1 (with a test command): each edit task is speculative, that many candidate patches at
    once."""
    earlier: list[dict[str, Any]]
    """Finished task records of earlier rounds (a replanned task equal to one of them is not
    redone)."""
    budget: NotRequired[BudgetSpec]
    """The run's budget, when it has one: each task is checked against it before it starts
    (logic/budget.py)."""


class EditStep(BaseModel):
    """One reply of an edit task's agent: a tool to use on its worktree, or `done`."""

    action: Literal["list", "read", "write", "test", "done"] = Field(
        description="list files, read a file, write a whole file, run the tests, or done"
    )
    path: str = Field("", description="file or folder, relative to the repository root")
    content: str = Field("", description="for write: the complete new content of the file")
    note: str = Field("", description="for done: what was changed, in one sentence")
