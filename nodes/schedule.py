"""Plan the learning run and step through its batches.

`start` validates the input, reads the playbook head and (with validation tasks) its
accuracy; `next_batch` moves to the next batch and clears the previous batch's runs;
`dispatch` sends one `learn_from_task` branch per task of the batch.
"""

from __future__ import annotations

import uuid
from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

from nodes.evaluate import evaluate
from nodes.fan_out import group
from nodes.playbook import select_items
from nodes.playbook_access import playbook_store
from nodes.route import context_of
from prompts.playbook_store import PlaybookError
from state.context import Context
from state.learn import LearnState


class InvalidLearnInput(ValueError):
    """The learn input cannot be run; the message says what to change."""


def validation_sample(state: LearnState) -> list[dict]:
    """The same first `val_size` validation tasks for every gate of the run."""
    return list(state.get("val_tasks") or [])[: state.get("val_size", 50)]


async def start(state: LearnState, runtime: Runtime[Context]) -> dict:
    ctx = context_of(runtime)
    tasks = state.get("tasks") or []
    if not tasks:
        raise InvalidLearnInput("no training tasks: give at least one {input, target} task")
    batch, epochs = state.get("batch", 8), state.get("epochs", 1)
    if not isinstance(batch, int) or batch < 1:
        raise InvalidLearnInput(f"batch must be at least 1, got {batch!r}")
    if not isinstance(epochs, int) or epochs < 1:
        raise InvalidLearnInput(f"epochs must be at least 1, got {epochs!r}")
    if state.get("val_size", 50) < 1:
        raise InvalidLearnInput(f"val_size must be at least 1, got {state.get('val_size')!r}")
    order = [i for _ in range(epochs) for i in range(len(tasks))]
    schedule = [order[i : i + batch] for i in range(0, len(order), batch)]
    name = state.get("playbook", "default")
    tenant = state.get("tenant", "default")
    try:
        head = await playbook_store(runtime, tenant).head(name)
    except PlaybookError as exc:
        raise InvalidLearnInput(str(exc)) from None
    sample = validation_sample(state)
    accuracy = None
    if sample:
        accuracy = (await evaluate(sample, [i.model_dump() for i in head.active], head.version, ctx,
                                   mode=state.get("mode", "direct"), tenant=tenant))["accuracy"]
    return {"learn_run_id": f"learn-{uuid.uuid4().hex[:12]}", "playbook": name, "tenant": tenant, "schedule": schedule,
            "batch_index": -1, "from_version": head.version, "to_version": head.version,
            "head_version": head.version, "head_accuracy": accuracy, "val_accuracy_before": accuracy,
            "val_accuracy_after": accuracy, "accepted": False}


def next_batch(state: LearnState) -> dict:
    return {"batch_index": state["batch_index"] + 1, "runs": None, "candidate": {}, "decision": {}}


async def dispatch(state: LearnState, runtime: Runtime[Context]) -> list[Send] | Literal["__end__"]:
    """Conditional edge: one branch per task of the current batch, or the end."""
    index = state["batch_index"]
    if index >= len(state["schedule"]):
        return "__end__"
    head = await playbook_store(runtime, state["tenant"]).head(state["playbook"])
    batch = [state["tasks"][t] for t in state["schedule"][index]]
    selections = await select_items([i.model_dump() for i in head.active], [t["input"] for t in batch],
                                    context_of(runtime).playbook_chars)
    work = [{"task": task, "items": chosen} for task, chosen in zip(batch, selections)]
    return [Send("learn_from_task", {"work": group_work, "version": head.version, "mode": state.get("mode", "direct"),
                                     "tenant": state["tenant"]})
            for group_work in group(work)]
