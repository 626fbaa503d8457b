"""The loop's learning step: the learn graph (handed in by graphs/loop.py) on stored runs.

One batch per round: one candidate, one canary.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.loop import free_slot
from parallax.runtime.run_context import subgraph_config, tenant_of
from parallax.state.context import Context
from parallax.state.loop import LoopState

Learner = Any
"""The compiled learn graph (`ainvoke(input, context=...)`)."""


async def learn_round(
    state: LoopState, runtime: Runtime[Context], *, learn: Learner
) -> dict[str, Any]:
    tenant = tenant_of(state.get("tenant"))
    given = {
        "from_traces": True,
        "playbook": state["playbook"],
        "tenant": tenant,
        "batch": state["limit"],
        "limit": state["limit"],
        "lease_s": state["lease_s"],
        "ties_to_canary": True,
        "mode": "direct",
        **{
            k: state[k] for k in ("max_cost", "max_tokens") if state.get(k) is not None
        },  # the round's budget
        **({"since": state["since"]} if state.get("since") else {}),
    }
    try:
        learned = await learn.ainvoke(given, subgraph_config(), context=runtime.context)
    except BaseException:
        if (
            runtime.store is not None
        ):  # the next round need not wait for the slot to expire; the claims do expire
            await free_slot(runtime.store, tenant, state["playbook"], state["round"])
        raise
    return {"learned": dict(learned), "traces": learned.get("traces") or {}}
