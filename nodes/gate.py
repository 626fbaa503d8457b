"""Accept a candidate playbook only if it does not make things worse, on a real signal.

The rule is logic/gate_decision.py's (docs/internals/learning.md#the-gates-rule); with `approve` a
passing candidate waits for a person's yes (an `interrupt` that shows the diff).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from parallax.logic.budget import graph_tally, spent_by
from parallax.logic.evaluate import Solver, correct_by_task, evaluate, validated
from parallax.logic.gate_decision import approved, gate_verdict, paired_changes, settle, unmeasured
from parallax.runtime.request_budget import Purse, holding
from parallax.runtime.run_context import context_of, tenant_of
from parallax.runtime.services import services_of
from parallax.runtime.storage.playbook_files import diff_items
from parallax.state.context import Context
from parallax.state.learn import LearnState, validation_sample
from parallax.state.playbook import PlaybookItem


async def gate(state: LearnState, runtime: Runtime[Context], *, solve: Solver) -> dict[str, Any]:
    """`solve` is the solve graph the candidate is evaluated with (graphs/learn.py binds it)."""
    ctx = context_of(runtime)
    candidate = state["candidate"]
    active = [i for i in candidate["items"] if i["status"] == "active"]
    sample = validation_sample(state)
    metrics: dict[str, Any] = {
        "evaluated": bool(sample),
        "val_size": len(sample),
        "margin": state.get("margin", 0.0),
        "train_accuracy": candidate["train_accuracy"],
        "guard_triggered": candidate["guard_triggered"],
    }
    if not candidate["operations"]:
        return {
            "decision": {
                "accepted": False,
                "reason": "no operations: nothing to learn from this batch",
                "metrics": {**metrics, "evaluated": False},
            }
        }
    results: dict[str, bool] = {}
    budget, own = graph_tally(services_of(ctx), state["learn_run_id"], state), Purse()
    if (
        sample and budget is not None and (stop := budget.reached())
    ):  # unmeasured is no pass: rejected, saying why
        return {
            "decision": {
                "accepted": False,
                "reason": f"{stop}: the candidate was not evaluated",
                "metrics": {**metrics, "evaluated": False},
            },
            "budget_stop": stop,
        }
    if sample:
        refused = budget.refused if budget is not None else 0
        with holding(budget, own):
            result = await evaluate(
                solve,
                sample,
                active,
                candidate["base_version"] + 1,
                ctx,
                mode=state.get("mode", "direct"),
                tenant=tenant_of(state.get("tenant")),
                votes=state.get("votes"),
                on_result=validated(runtime.stream_writer, "candidate", len(sample)),
            )
        if (
            budget is not None and budget.refused > refused
        ):  # runs the budget cut short measure nothing
            stop = f"budget reached: {budget.describe()}"
            return {
                "decision": {
                    "accepted": False,
                    "reason": f"{stop}: the candidate's evaluation was cut short",
                    "metrics": {**metrics, "evaluated": False},
                },
                "budget_stop": stop,
                "spend": spent_by(own),
            }
        before, results = state.get("head_accuracy") or 0.0, correct_by_task(result)
        changed = paired_changes(state.get("head_results") or {}, results)
        verdict, reason, band = gate_verdict(
            before, result["accuracy"], len(sample), state.get("margin", 0.0), changed
        )
        metrics.update(
            val_accuracy_before=before,
            val_accuracy_after=result["accuracy"],
            val_errors=result["errors"],
            val_failures=result["failures"],
            val_noise=band,
            signal=verdict == "accept",
        )
    else:
        verdict, reason = unmeasured("no validation tasks")
    if verdict == "ask" and state.get("ties_to_canary") and not state.get("approve"):
        verdict, reason = "accept", f"not worse offline ({reason}); a canary judges it on live runs"
        metrics["not_worse_only"] = True
    asked = verdict == "ask"
    verdict, reason = settle(verdict, reason, person=bool(state.get("approve")))
    if verdict == "reject":
        return {
            "decision": {"accepted": False, "reason": reason, "metrics": metrics},
            "spend": spent_by(own),
        }
    if state.get("approve"):
        answer = interrupt(
            {
                "question": "Accept this playbook update? (yes/no)",
                "metrics": metrics,
                **({"why_asked": reason} if asked else {}),
                "diff": diff_items(
                    *(
                        [PlaybookItem.model_validate(i) for i in candidate[k]]
                        for k in ("base_items", "items")
                    )
                ),
            }
        )
        if str(answer).strip().lower() not in ("y", "yes", "true", "1"):
            return {
                "decision": {
                    "accepted": False,
                    "reason": "rejected by a human reviewer",
                    "metrics": metrics,
                },
                "spend": spent_by(own),
            }
        if asked:
            reason = approved(reason)
            metrics["approved_without_signal"] = True
    return {
        "decision": {"accepted": True, "reason": reason, "metrics": metrics, "results": results},
        "spend": spent_by(own),
    }
