"""A plan checked before anything runs, and the DAG arithmetic the dispatcher needs.

See docs/internals/plans.md#the-plan-check.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import PurePosixPath
from typing import Any

from parallax.state.plan import Plan, PlanTask
from parallax.state.vocabulary import TASK_ROUTE, per_slice

PLACEHOLDER = re.compile(r"\$\{(\d+)\}|\$(\d+)(?!\d)")
TOOLS = ("calc",)
"""Tools a `tool` task may name in `inputs["tool"]` (parallax/logic/plan_tools.py)."""


class PlanError(ValueError):
    """A plan that must not run; the message lists what is wrong, task by task."""


@dataclass(frozen=True)
class PlanLimits:
    """What the run around a plan allows."""

    max_tasks: int
    has_repo: bool = False
    has_document: bool = False


def placeholders(text: str) -> list[int]:
    """Task ids named in `text` by `$N` or `${N}`, in order of appearance (repeats kept)."""
    return [int(a or b) for a, b in PLACEHOLDER.findall(text or "")]


def substitute(text: str, results: dict[int, str]) -> str:
    """`text` with every `$N` / `${N}` replaced by task N's result (all of them, however many)."""
    return PLACEHOLDER.sub(lambda m: str(results[int(m.group(1) or m.group(2))]), text or "")


def task_texts(task: PlanTask) -> list[str]:
    return [task.goal, *task.inputs.values()]


def _path_problem(path: str) -> str:
    pure = PurePosixPath(path)
    if (
        not path.strip()
        or pure.is_absolute()
        or ".." in pure.parts
        or (pure.parts and pure.parts[0] == ".git")
    ):
        return f"{path!r} is not a path inside the repository"
    return ""


def problems(plan: Plan, limits: PlanLimits) -> list[str]:
    """Everything that stops `plan` from running, in plan order ([] for a runnable plan)."""
    found: list[str] = []
    if not plan.tasks:
        return ["the plan has no tasks: give at least one"]
    if len(plan.tasks) > limits.max_tasks:
        found.append(
            f"the plan has {len(plan.tasks)} tasks, more than {limits.max_tasks}"
            " (PARALLAX_PLAN_MAX_TASKS): combine steps"
        )
    ids = [t.id for t in plan.tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        found.append(f"duplicate task ids {duplicates}: give every task its own id")
    known = set(ids)
    for task in plan.tasks:
        found += _reference_problems(task, known) + _kind_problems(task, limits)
    for ref in sorted(set(plan.outputs) - known):
        found.append(f"outputs name unknown task {ref}")
    found += _synthesis_problems(plan, known)
    if not any("depends on unknown" in f or "depends on itself" in f for f in found):
        found += _cycle_problems(plan)
    return found


def _reference_problems(task: PlanTask, known: set[int]) -> list[str]:
    """A task's dependencies and `$N` placeholders that name no task, itself, or a task it does
    not wait for."""
    name, found = f"task {task.id}", []
    if task.id in task.deps:
        found.append(f"{name} depends on itself")
    for dep in sorted(set(task.deps) - known):
        found.append(f"{name} depends on unknown task {dep}")
    for ref in dict.fromkeys(p for text in task_texts(task) for p in placeholders(text)):
        if ref not in known:
            found.append(f"{name} uses ${ref}, but there is no task {ref}")
        elif ref not in task.deps:
            found.append(f"{name} uses ${ref} but does not list {ref} in deps")
    return found


def _kind_problems(task: PlanTask, limits: PlanLimits) -> list[str]:
    """What a task of its kind needs: an edit task a repository and files inside it, a tool task
    a known tool, a section task a document."""
    name, found = f"task {task.id}", []
    if task.kind == "edit":
        if not limits.has_repo:
            found.append(f"{name} is an edit task but the run has no repository (--repo)")
        if not task.writes:
            found.append(f"{name} is an edit task and must list the files it writes")
        found += [f"{name} writes {p}" for w in task.writes if (p := _path_problem(w))]
    elif task.writes:
        found.append(f"{name} lists writes, but only edit tasks write files")
    if task.kind == "tool" and task.inputs.get("tool") not in TOOLS:
        found.append(f"{name} is a tool task: set inputs.tool to one of {', '.join(TOOLS)}")
    reads_document = per_slice(TASK_ROUTE.get(task.kind))
    if reads_document and not (limits.has_document or task.inputs.get("document")):
        found.append(
            f"{name} reads a document in sections, but the run has none: use kind solve, "
            "or give a document (--input-file with --question)"
        )
    return found


def _synthesis_problems(plan: Plan, known: set[int]) -> list[str]:
    """What the plan's synthesis needs: an assembly a template naming known tasks, a vote two
    outputs."""
    found = []
    if plan.synthesis == "assembly":
        if not plan.template.strip():
            found.append("assembly needs a template with ${N} where task N's result goes")
        found += [
            f"the template uses ${ref}, but there is no task {ref}"
            for ref in dict.fromkeys(placeholders(plan.template))
            if ref not in known
        ]
    if plan.synthesis == "vote" and len(plan.output_ids()) < 2:
        found.append("vote synthesis needs at least two output tasks answering the same question")
    return found


def _cycle_problems(plan: Plan) -> list[str]:
    """The dependencies' cycle, if they form one."""
    try:
        TopologicalSorter({t.id: set(t.deps) for t in plan.tasks}).prepare()
    except CycleError as exc:
        cycle = " -> ".join(str(i) for i in exc.args[1])
        return [f"the dependencies form a cycle ({cycle}): a task cannot wait for its own result"]
    return []


def check_plan(plan: Plan, limits: PlanLimits) -> Plan:
    """`plan` if it may run, else PlanError with every problem (at most five, then a count)."""
    found = problems(plan, limits)
    if found:
        shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
        raise PlanError(f"invalid plan: {shown}")
    return plan


def children(plan: Plan) -> dict[int, list[int]]:
    below: dict[int, list[int]] = {t.id: [] for t in plan.tasks}
    for task in plan.tasks:
        for dep in task.deps:
            below[dep].append(task.id)
    return below


def topological(plan: Plan) -> list[int]:
    """Task ids with every task after its dependencies (ties in plan order)."""
    order = {t.id: i for i, t in enumerate(plan.tasks)}
    sorter = TopologicalSorter({t.id: set(t.deps) for t in plan.tasks})
    sorter.prepare()
    result: list[int] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=order.__getitem__)
        result += ready
        sorter.done(*ready)
    return result


def remaining_path(plan: Plan, weight: dict[int, float] | None = None) -> dict[int, float]:
    """Per task: the longest path from it to the end of the plan, itself included (unit weights by
    default)."""
    below = children(plan)
    longest: dict[int, float] = {}
    for task_id in reversed(topological(plan)):
        own = (weight or {}).get(task_id, 1.0)
        longest[task_id] = own + max((longest[c] for c in below[task_id]), default=0.0)
    return longest


def levels(plan: Plan) -> dict[int, int]:
    """Per task: its depth (0 for tasks without dependencies), for level-by-level comparisons and
    drawings."""
    depth: dict[int, int] = {}
    by_id = {t.id: t for t in plan.tasks}
    for task_id in topological(plan):
        depth[task_id] = 1 + max((depth[d] for d in by_id[task_id].deps), default=-1)
    return depth


def critical_path(plan: Plan, weight: dict[int, float]) -> float:
    """The length of the longest weighted path: no schedule can finish sooner."""
    return max(remaining_path(plan, weight).values(), default=0.0)


def fingerprint(task: PlanTask, plan: Plan, cache: dict[int, str] | None = None) -> str:
    """What a task would compute: its own fields and, recursively, its dependencies' fingerprints.

    Two tasks (of a plan and its replan) with one fingerprint compute the same thing, so a
    finished one is reused instead of redone."""
    cache = {} if cache is None else cache
    if task.id not in cache:
        own = task.model_dump(include={"goal", "kind", "inputs", "writes"})
        own["deps"] = sorted(fingerprint(plan.task(d), plan, cache) for d in task.deps)
        cache[task.id] = hashlib.sha256(json.dumps(own, sort_keys=True).encode()).hexdigest()[:16]
    return cache[task.id]


def fingerprints(plan: Plan) -> dict[int, str]:
    """Every task's fingerprint, each task hashed once: a dispatch computes them once for all its
    tasks (per task, each record and reuse check re-hashed every ancestor)."""
    cache: dict[int, str] = {}
    for task in plan.tasks:
        fingerprint(task, plan, cache)
    return cache


def same_plan(a: Plan | dict[str, Any], b: Plan | dict[str, Any]) -> bool:
    """Whether two plans are the same plan (field by field, defaults filled in)."""
    dump = [Plan.model_validate(p).model_dump(mode="json") for p in (a, b)]
    return json.dumps(dump[0], sort_keys=True) == json.dumps(dump[1], sort_keys=True)


def writes_overlap(a: list[str], b: list[str]) -> bool:
    """Whether two lists of repository paths share a file (a directory covers what is under it)."""

    def parts(path: str) -> tuple[str, ...]:
        return PurePosixPath(path.strip().rstrip("/")).parts

    return any(x[: len(y)] == y or y[: len(x)] == x for x in map(parts, a) for y in map(parts, b))
