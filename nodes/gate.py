"""Accept a candidate playbook only if it does not make things worse.

Candidate and current playbook are evaluated on the same validation sample; the
candidate passes when its accuracy is not below the current one by more than `margin`.
With `approve`, a passing candidate also waits for a human yes/no (a LangGraph
`interrupt` that shows the diff). Without validation tasks the gate has nothing to
measure and lets the candidate through, saying so in its metrics.
"""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from parallax.logic.evaluate import Solver, evaluate
from parallax.runtime.run_context import context_of
from parallax.runtime.storage.playbook_files import diff_items
from parallax.state.context import Context
from parallax.state.learn import LearnState, validation_sample
from parallax.state.playbook import PlaybookItem


async def gate(state: LearnState, runtime: Runtime[Context], *, solve: Solver) -> dict:
    """`solve` is the solve graph the candidate is evaluated with (graphs/learn.py binds it)."""
    ctx = context_of(runtime)
    candidate = state["candidate"]
    active = [i for i in candidate["items"] if i["status"] == "active"]
    sample = validation_sample(state)
    metrics: dict = {"evaluated": bool(sample), "val_size": len(sample), "margin": state.get("margin", 0.0),
                     "train_accuracy": candidate["train_accuracy"], "guard_triggered": candidate["guard_triggered"]}
    if not candidate["operations"]:
        return {"decision": {"accepted": False, "reason": "no operations: nothing to learn from this batch",
                             "metrics": {**metrics, "evaluated": False}}}
    if sample:
        result = await evaluate(solve, sample, active, candidate["base_version"] + 1, ctx, mode=state.get("mode", "direct"),
                                tenant=state["tenant"])
        before = state.get("head_accuracy") or 0.0
        metrics.update(val_accuracy_before=before, val_accuracy_after=result["accuracy"], val_errors=result["errors"])
        passed = result["accuracy"] >= before - state.get("margin", 0.0)
        reason = "" if passed else f"validation accuracy fell from {before} to {result['accuracy']}"
    else:
        passed, reason = True, "no validation tasks: accepted without evaluation"
    if passed and state.get("approve"):
        answer = interrupt({"question": "Accept this playbook update? (yes/no)", "metrics": metrics,
                            "diff": diff_items(*(
                                [PlaybookItem.model_validate(i) for i in candidate[k]] for k in ("base_items", "items")))})
        passed = str(answer).strip().lower() in ("y", "yes", "true", "1")
        reason = reason if passed else "rejected by a human reviewer"
    return {"decision": {"accepted": passed, "reason": reason, "metrics": metrics}}
