"""Plan a learning run and step through its batches: `start`, `next_batch` and `dispatch`."""

from __future__ import annotations

from typing import Any, Literal, cast

from langgraph.runtime import Runtime
from langgraph.types import Send

from parallax.logic.branch_plans import group
from parallax.logic.budget import graph_tally, spent_by
from parallax.logic.evaluate import Solver, correct_by_task, evaluate, validated
from parallax.logic.graph_inputs import validate_learn_input
from parallax.logic.learn_schedule import batch_count, batch_of
from parallax.logic.releases import serve_prompts
from parallax.logic.trace_learning import claim_traces
from parallax.prompts.templates import LEARN_PROMPTS, SOLVE_PROMPTS
from parallax.runtime.request_budget import Purse, holding
from parallax.runtime.run_context import context_of, task_scoped_id, tenant_of
from parallax.runtime.services import new_fan_out, services_of
from parallax.runtime.storage.namespaces import StoreError
from parallax.runtime.storage.stores import playbooks_in
from parallax.state.context import Context
from parallax.state.learn import LearnState, validation_sample
from parallax.state.records import LearnTask, TaskData
from parallax.state.trace_claims import TraceClaim


class InvalidLearnInput(ValueError):
    """The learn input cannot be run; the message says what to change."""


async def start(state: LearnState, runtime: Runtime[Context], *, solve: Solver) -> dict[str, Any]:
    """Validate the input, plan the batches, and measure the head on the validation sample with
    `solve`."""
    ctx = context_of(runtime)
    # its definition's bounds (epochs, batch, tasks, ...), here too: no caller skips them
    settings = validate_learn_input(state)
    from_traces, tasks = (
        bool(state.get("from_traces")),
        cast(list[TaskData], state.get("tasks") or []),
    )
    limit, lease_s = settings["limit"], settings["lease_s"]
    cut = not from_traces and limit is not None and limit < len(tasks)
    name = state.get("playbook", "default")
    tenant = tenant_of(state.get("tenant"))
    try:
        head = await playbooks_in(runtime.store, tenant).head(name)
    except StoreError as exc:
        raise InvalidLearnInput(str(exc)) from None
    run_id = (  # the same if this run is taken over and scheduled again
        f"learn-{task_scoped_id()[:12]}"
    )
    found: TraceClaim | dict[str, Any] = {}
    replay: list[TaskData] = []
    if from_traces:  # its `since` is valid: validate_learn_input parsed it
        tasks, replay, found = await claim_traces(
            runtime.store,
            tenant,
            name,
            run_id,
            state.get("since"),
            limit,
            float(lease_s),
            settings["val_size"],
        )
    elif cut:
        tasks = tasks[:limit]
    own_sample = not from_traces or state.get("val_tasks")
    sample = validation_sample(state) if own_sample else replay[: settings["val_size"]]
    accuracy, results = None, {}
    own = Purse()
    progress = (
        runtime.stream_writer
    )  # what a watching caller shows at once (cli/learn_report.py); nothing otherwise
    epochs, size = settings["epochs"], settings["batch"]
    sizes = [
        len(batch_of(i, len(tasks), epochs, size))
        for i in range(batch_count(len(tasks), epochs, size))
    ]
    progress(
        {"learn": "start", "version": head.version, "batch_sizes": sizes, "total": len(sample)}
    )
    if sample:
        with holding(
            graph_tally(services_of(ctx), run_id, state), own
        ):  # the run's budget holds the head's measure too
            measured = await evaluate(
                solve,
                sample,
                [i.as_data() for i in head.active],
                head.version,
                ctx,
                mode=state.get("mode", "direct"),
                tenant=tenant,
                votes=state.get("votes"),
                on_result=validated(progress, "head", len(sample)),
            )
        accuracy = measured["accuracy"]
        results = correct_by_task(measured)
    # the versions every run of this learning run uses, solve prompts included, read once
    prompts = await serve_prompts(
        runtime.store, tenant, LEARN_PROMPTS + SOLVE_PROMPTS, run_id, allow_canary=False
    )
    return {
        "learn_run_id": run_id,
        "playbook": name,
        "tenant": tenant,
        "batch_index": -1,
        "from_version": head.version,
        "to_version": head.version,
        "head_version": head.version,
        "head_accuracy": accuracy,
        "head_results": results,
        "val_accuracy_before": accuracy,
        "val_accuracy_after": accuracy,
        "accepted": False,
        "prompts": prompts,
        "traces": found,
        "spend": spent_by(own),
        "budget_stop": "",
        **(
            {"tasks": tasks, "val_tasks": sample}
            if from_traces
            else {"tasks": tasks}
            if cut
            else {}
        ),
    }


def next_batch(state: LearnState, runtime: Runtime[Context]) -> dict[str, Any]:
    """The next batch; none once the run's budget is reached (the run ends saying so)."""
    budget = graph_tally(services_of(context_of(runtime)), state["learn_run_id"], state)
    stop = budget.reached() or state.get("budget_stop") if budget is not None else None
    count = batch_count(
        len(state.get("tasks") or []), state.get("epochs", 1), state.get("batch", 8)
    )
    if stop and state["batch_index"] + 1 < count:  # reached, or it cut runs short already
        return {
            "batch_index": count,
            "runs": None,
            "candidate": {},
            "decision": {},
            "budget_stop": f"{stop}: batch {state['batch_index'] + 2} of {count} was not started",
        }
    index = state["batch_index"] + 1
    if index < count:  # said as the batch starts: its first task ends a few model calls later
        tasks = len(state.get("tasks") or [])
        runtime.stream_writer(
            {
                "learn": "batch",
                "batch": index + 1,
                "total": len(batch_of(index, tasks, state.get("epochs", 1), state.get("batch", 8))),
            }
        )
    return {"batch_index": index, "runs": None, "candidate": {}, "decision": {}}


async def dispatch(state: LearnState, runtime: Runtime[Context]) -> list[Send] | Literal["__end__"]:
    """Conditional edge: one branch per task of the current batch, or the end."""
    index, epochs, size = state["batch_index"], state.get("epochs", 1), state.get("batch", 8)
    tasks = cast(
        list[TaskData], state.get("tasks") or []
    )  # TrainingTasks (stored runs: with their record)
    if index >= batch_count(len(tasks), epochs, size):
        return "__end__"
    tenant = tenant_of(state.get("tenant"))
    head = await playbooks_in(runtime.store, tenant).head(state["playbook"])
    batch = [tasks[t] for t in batch_of(index, len(tasks), epochs, size)]
    items = [i.as_data() for i in head.active]
    fan_out = new_fan_out()
    payloads: list[LearnTask] = [
        {
            "tasks": tasks,
            "items": items,
            "version": head.version,
            "mode": state.get("mode", "direct"),
            "tenant": tenant,
            "prompts": state.get("prompts") or {},
            "fan_out": fan_out,
        }
        for tasks in group(batch)
    ]
    if state.get("votes") is not None:
        for payload in payloads:
            payload["votes"] = state["votes"]
    budget = graph_tally(services_of(context_of(runtime)), state["learn_run_id"], state)
    if budget is not None:
        for payload in payloads:
            payload["budget"] = budget.spec(state["learn_run_id"])
    return [Send("learn_from_task", payload) for payload in payloads]
