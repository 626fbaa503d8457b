"""A learn run on a few real Formula tasks against the real local model.

Checks structure, not accuracy: the run completes, every batch is committed or rejected
with a reason, and the store agrees with what the run reports.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from parallax.graphs.learn import builder
from parallax.logic.task_files import load_tasks
from parallax.runtime.storage.stores import playbooks_in

pytestmark = pytest.mark.integration

FORMULA = Path(__file__).resolve().parents[2] / "examples"
"""The README's learn example files: the first Formula train and val tasks (examples/README.md)."""


async def test_learn_on_formula_tasks_commits_or_rejects_with_a_reason(real_model, monkeypatch):
    monkeypatch.setenv("PARALLAX_MAX_TOKENS", "160")
    train = load_tasks(FORMULA / "train.jsonl")[0][:4]
    val = load_tasks(FORMULA / "val.jsonl")[0][:3]
    store = InMemoryStore()
    out = await builder.compile(store=store).ainvoke(
        {"tasks": train, "val_tasks": val, "val_size": 3, "batch": 2, "playbook": "formula"}
    )
    assert out["from_version"] == 0 and len(out["batches"]) == 2
    assert 0.0 <= out["val_accuracy_before"] <= 1.0
    for batch in out["batches"]:
        assert batch["reflections"] == 2
        assert batch["accepted"] or batch["reason"], batch
    head = await playbooks_in(store).head("formula")
    accepted = [b for b in out["batches"] if b["accepted"]]
    assert head.version == out["to_version"] == len(accepted)
    assert len(head.active) == out["batches"][-1]["items_total"]
    for item in head.active:  # every learned item can be traced to the reflections it came from
        assert item.provenance and item.text
