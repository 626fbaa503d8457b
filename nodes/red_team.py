"""The optional red-team branch: argues against the leading answer and never votes."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.branch_plans import run_metadata
from parallax.logic.budget import run_tally, state_reached
from parallax.prompts.solve import red_team_messages
from parallax.runtime.branch_call import call_branch
from parallax.runtime.request_budget import holding
from parallax.runtime.run_context import context_of
from parallax.runtime.services import services_of
from parallax.state.context import Context
from parallax.state.payloads import Objection
from parallax.state.solve import SolveState


async def red_team(state: SolveState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    if stop := state_reached(state, services_of(ctx)):
        return {"budget_stop": f"{stop}: the red team was not asked"}
    template = (state.get("prompts") or {}).get("red_team")
    identity = {
        "id": f"red_team-{uuid.uuid4().hex[:8]}",
        "parent_id": state["trace_id"],
        "kind": "red_team",
        "prompt": {"name": "red_team", "version": template.get("version", 0) if template else 0},
    }
    messages = red_team_messages(
        state["task"], state.get("question", ""), state["answer"], version=template
    )
    with holding(run_tally(services_of(ctx), state)):
        record, objection = await call_branch(
            identity,
            messages,
            Objection,
            ctx,
            model=ctx.reviewer_model,
            temperature=0.7,
            run_metadata=dict(run_metadata(state)),
        )
    text = f"[{objection.severity}] {objection.objection}" if objection else ""
    return {"branches": [record.model_dump()], "objection": text}
