"""The gate of a prompt edit: the served version and the edit on the same validation tasks.

Both evaluations run pinned and untraced; the verdict is logic/gate_decision.py's rule.
See docs/data-loop.md (prompts).
"""

from __future__ import annotations

from typing import Any

from langgraph.store.base import BaseStore

from parallax.logic.evaluate import Solver, correct_by_task, evaluate
from parallax.logic.gate_decision import approved, gate_verdict, paired_changes, settle, unmeasured
from parallax.logic.releases import serve_playbook, serve_prompts
from parallax.prompts.templates import LEARN_PROMPTS, SOLVE_PROMPTS
from parallax.runtime.storage.labels import move_label
from parallax.runtime.storage.stores import prompts_in
from parallax.state.context import Context
from parallax.state.records import PromptVersion, TaskData
from parallax.state.release_record import LabelsRecord


async def gate_edit(
    store: BaseStore,
    solve: Solver,
    name: str,
    system: str,
    user: str,
    tenant: str,
    val_tasks: list[TaskData],
    mode: str,
    playbook: str,
    approve: bool,
    by: str,
    context: Context,
) -> dict[str, Any]:
    """Evaluate the served version and the edit on `val_tasks` with `solve` (a solve graph compiled
    without a checkpointer); commit the edit or keep it as a rejected candidate. `approve`: a person
    has said yes to an edit the gate cannot accept by itself."""
    prompts = prompts_in(store, tenant)
    head = await prompts.head(name)
    current = (await serve_prompts(store, tenant, (name,), "gate", allow_canary=False))[name]
    gate: dict[str, Any] = {
        "evaluated": bool(val_tasks),
        "val_size": len(val_tasks),
        "against": current["version"],
    }
    if name in LEARN_PROMPTS:
        verdict, reason = unmeasured(f"the gate's solve runs do not use the {name} prompt")
    elif val_tasks:
        served = await serve_prompts(store, tenant, SOLVE_PROMPTS, "gate", allow_canary=False)
        pinned = {
            n: PromptVersion(version=p["version"], system=p["system"], user=p["user"])
            for n, p in served.items()
        }
        version, _ = await serve_playbook(store, tenant, playbook, "gate")
        items = [i.as_data() for i in version.active]
        runs: dict[str, dict[str, Any]] = {}
        for label, text in (
            ("before", pinned[name]),
            ("after", PromptVersion(version=head["version"] + 1, system=system, user=user)),
        ):
            runs[label] = await evaluate(
                solve,
                val_tasks,
                items,
                version.version,
                context,
                mode=mode,
                tenant=tenant,
                prompts={**pinned, name: text},
            )
        before, after = runs["before"]["accuracy"], runs["after"]["accuracy"]
        changed = paired_changes(correct_by_task(runs["before"]), correct_by_task(runs["after"]))
        verdict, reason, band = gate_verdict(before, after, len(val_tasks), 0.0, changed)
        gate.update(val_accuracy_before=before, val_accuracy_after=after, val_noise=band)
    else:
        verdict, reason = unmeasured("no validation tasks")
    asked = verdict == "ask"
    verdict, reason = settle(verdict, reason, person=approve)
    if verdict == "reject":
        candidate = await prompts.reject(name, system, user, by, gate, reason)
        return {
            "accepted": False,
            "reason": reason,
            "gate": gate,
            "candidate": candidate["candidate_id"],
        }
    if asked:  # the person's yes was given up front (--approve)
        reason = approved(reason)
        gate["approved_without_signal"] = True

    def pin(labels: LabelsRecord) -> None:
        if labels["production"] is None:
            move_label(
                labels,
                "production",
                current["version"],
                by,
                f"pinned before v{head['version'] + 1} was set: edits reach runs through `prompts"
                " release`",
            )

    await prompts.labels(name).change(pin)
    record = await prompts.commit(name, system, user, by, gate, reason)
    return {"accepted": True, "reason": reason, "gate": gate, "version": record["version"]}
