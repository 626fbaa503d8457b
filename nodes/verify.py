"""Plan mode: check what a round produced, layer by layer, before the joiner decides.

Layers: schema, facts, semantics (docs/plan.md, verify); the rules layer is the joiner's.
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.budget import run_tally
from parallax.logic.contradictions import find_contradictions
from parallax.prompts.plan import contradiction_messages
from parallax.runtime import embeddings
from parallax.runtime.branch_call import call_branch
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of
from parallax.runtime.services import services_of
from parallax.state.context import Context, setting
from parallax.state.payloads import Contradiction
from parallax.state.plan import FINISHED, PlanState


def _schema_layer(records: list[dict[str, Any]]) -> dict[str, Any]:
    broken = [
        r["id"] for r in records if r["status"] in FINISHED and not isinstance(r.get("output"), str)
    ]
    return {"checked": len(records), "invalid": broken, "passed": not broken}


def _facts_layer(records: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    per_task, findings = {}, []
    for record in records:
        facts = (record.get("verification") or {}).get("facts")
        if not facts:
            continue
        per_task[str(record["id"])] = {k: facts[k] for k in ("checked", "verified", "dropped")}
        findings += [
            {**f, "task": record["id"], "source": f"task {record['id']} slice {f['slice_index']}"}
            for f in facts.get("findings", [])
        ]
    checked = sum(t["checked"] for t in per_task.values())
    verified = sum(t["verified"] for t in per_task.values())
    return {
        "checked": checked,
        "verified": verified,
        "dropped": checked - verified,
        "share_verified": round(verified / checked, 3) if checked else None,
        "tasks": per_task,
    }, findings


async def verify(state: PlanState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    records = [r for r in state.get("tasks", []) if r["round"] == state["round"]]
    facts, findings = _facts_layer(records)
    judged: list[dict[str, Any]] = []
    budget = run_tally(services_of(ctx), state)
    stops: list[str] = []

    async def judge(first: str, second: str) -> bool | None:
        if budget is not None and (stop := budget.reached()):
            stops.append(f"{stop}: a contradiction check was not asked")
            return None
        identity = {
            "id": f"contradiction-{uuid.uuid4().hex[:8]}",
            "parent_id": state["trace_id"],
            "kind": "contradiction",
        }
        record, verdict = await call_branch(
            identity,
            contradiction_messages(first, second),
            Contradiction,
            ctx,
            model=ctx.reviewer_model,
            temperature=0.0,
        )
        judged.append(record.model_dump())
        if budget is not None:
            budget.add(judged[-1])
        return None if verdict is None else verdict.contradicts

    with holding(budget):
        semantics = await find_contradictions(
            findings, ctx.embedder or embeddings.embed, judge, setting(ctx.plan_contradiction_pairs)
        )
    return {
        "branches": judged,
        **({"budget_stop": stops[0]} if stops else {}),
        "verification": {"schema": _schema_layer(records), "facts": facts, "semantics": semantics},
    }
