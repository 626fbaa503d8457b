"""Plan the learning run and step through its batches.

`start` validates the input, reads the playbook head and (with validation tasks) its
accuracy; with `from_traces` it first claims the stored runs to learn from and takes the
runs that carry a target as the validation tasks (logic/trace_learning.py);
`next_batch` moves to the next batch and clears the previous batch's runs;
`dispatch` sends one `learn_from_task` branch per task of the batch.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime
from langgraph.types import Send

from parallax.logic.branch_plans import group
from parallax.logic.evaluate import Solver, correct_by_task, evaluate, validated
from parallax.logic.releases import serve_prompts
from parallax.logic.routing import MAX_VOTES
from parallax.logic.run_stats import BadFilter
from parallax.logic.trace_learning import LEASE_S, claim_traces
from parallax.prompts.templates import LEARN_PROMPTS, SOLVE_PROMPTS
from parallax.runtime.run_context import context_of, task_scoped_id, tenant_of
from parallax.runtime.services import new_fan_out
from parallax.runtime.storage.namespaces import StoreError
from parallax.runtime.storage.stores import playbooks_in
from parallax.state.context import Context
from parallax.state.learn import LearnState, validation_sample
from parallax.state.records import LearnTask


class InvalidLearnInput(ValueError):
    """The learn input cannot be run; the message says what to change."""


async def start(state: LearnState, runtime: Runtime[Context], *, solve: Solver) -> dict[str, Any]:
    """Validate the input, plan the batches, and measure the head on the validation sample with `solve`."""
    ctx = context_of(runtime)
    from_traces = bool(state.get("from_traces"))
    tasks = state.get("tasks") or []
    if from_traces and tasks:
        raise InvalidLearnInput("give `tasks` or `from_traces`, not both")
    if not tasks and not from_traces:
        raise InvalidLearnInput("no training tasks: give at least one {input, target} task, or from_traces")
    limit = state.get("limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise InvalidLearnInput(f"limit must be at least 1, got {limit!r}")
    lease_s = state.get("lease_s", LEASE_S)
    if not isinstance(lease_s, (int, float)) or lease_s <= 0:
        raise InvalidLearnInput(f"lease_s must be more than 0 seconds, got {lease_s!r}")
    batch, epochs = state.get("batch", 8), state.get("epochs", 1)
    if from_traces and epochs != 1:
        raise InvalidLearnInput("from_traces learns from each run once: leave epochs out")
    if not isinstance(batch, int) or batch < 1:
        raise InvalidLearnInput(f"batch must be at least 1, got {batch!r}")
    if not isinstance(epochs, int) or epochs < 1:
        raise InvalidLearnInput(f"epochs must be at least 1, got {epochs!r}")
    if state.get("val_size", 50) < 1:
        raise InvalidLearnInput(f"val_size must be at least 1, got {state.get('val_size')!r}")
    votes = state.get("votes")
    if votes is not None and (not isinstance(votes, int) or isinstance(votes, bool) or not 1 <= votes <= MAX_VOTES):
        raise InvalidLearnInput(f"votes must be a whole number from 1 to {MAX_VOTES}, got {votes!r}")
    name = state.get("playbook", "default")
    tenant = tenant_of(state.get("tenant"))
    try:
        head = await playbooks_in(runtime.store, tenant).head(name)
    except StoreError as exc:
        raise InvalidLearnInput(str(exc)) from None
    run_id = f"learn-{task_scoped_id()[:12]}"  # the same if this run is taken over and scheduled again
    found: dict[str, Any] = {}
    replay: list[dict[str, Any]] = []
    if from_traces:
        try:
            tasks, replay, found = await claim_traces(runtime.store, tenant, name, run_id, state.get("since"), limit,
                                                      float(lease_s), state.get("val_size", 50))
        except BadFilter as exc:
            raise InvalidLearnInput(str(exc)) from None
    elif limit is not None:
        tasks = tasks[:limit]
    order = [i for _ in range(epochs) for i in range(len(tasks))]
    schedule = [order[i : i + batch] for i in range(0, len(order), batch)]
    sample = validation_sample(state) if not from_traces or state.get("val_tasks") else replay[: state.get("val_size", 50)]
    accuracy, results = None, {}
    progress = get_stream_writer()  # what a watching caller shows at once (cli/learn_report.py); nothing otherwise
    progress({"learn": "start", "version": head.version, "batch_sizes": [len(b) for b in schedule], "total": len(sample)})
    if sample:
        measured = await evaluate(solve, sample, [i.as_data() for i in head.active], head.version, ctx,
                                  mode=state.get("mode", "direct"), tenant=tenant, votes=state.get("votes"),
                                  on_result=validated(progress, "head", len(sample)))
        accuracy = measured["accuracy"]
        results = correct_by_task(measured)
    # the versions every run of this learning run uses, solve prompts included, read once
    prompts = await serve_prompts(runtime.store, tenant, LEARN_PROMPTS + SOLVE_PROMPTS, run_id, allow_canary=False)
    return {"learn_run_id": run_id, "playbook": name, "tenant": tenant, "schedule": schedule,
            "batch_index": -1, "from_version": head.version, "to_version": head.version,
            "head_version": head.version, "head_accuracy": accuracy, "head_results": results,
            "val_accuracy_before": accuracy, "val_accuracy_after": accuracy, "accepted": False, "prompts": prompts,
            "traces": found, **({"tasks": tasks, "val_tasks": sample} if from_traces else {})}


def next_batch(state: LearnState) -> dict[str, Any]:
    index = state["batch_index"] + 1
    if index < len(state["schedule"]):  # said as the batch starts: its first task ends a few model calls later
        get_stream_writer()({"learn": "batch", "batch": index + 1, "total": len(state["schedule"][index])})
    return {"batch_index": index, "runs": None, "candidate": {}, "decision": {}}


async def dispatch(state: LearnState, runtime: Runtime[Context]) -> list[Send] | Literal["__end__"]:
    """Conditional edge: one branch per task of the current batch, or the end."""
    index = state["batch_index"]
    if index >= len(state["schedule"]):
        return "__end__"
    head = await playbooks_in(runtime.store, state["tenant"]).head(state["playbook"])
    batch = [state["tasks"][t] for t in state["schedule"][index]]
    items = [i.as_data() for i in head.active]
    fan_out = new_fan_out()
    payloads: list[LearnTask] = [{"tasks": tasks, "items": items, "version": head.version, "mode": state.get("mode", "direct"),
                                  "tenant": state["tenant"], "prompts": state.get("prompts") or {}, "fan_out": fan_out}
                                 for tasks in group(batch)]
    if state.get("votes") is not None:
        for payload in payloads:
            payload["votes"] = state["votes"]
    return [Send("learn_from_task", payload) for payload in payloads]
