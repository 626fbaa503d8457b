"""The `route` node: validate the input, pick the route, cut slices, read the playbook.

The rules live in logic/routing.py (which route) and logic/slicing.py (which slices);
this node applies them and reads the tenant's playbook head from the run's store.
"""

from __future__ import annotations

import uuid

from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from parallax.logic.playbook_selection import select_items
from parallax.logic.routing import InvalidInput, choose_route, validate
from parallax.logic.slicing import split_into_slices
from parallax.runtime.run_context import context_of
from parallax.runtime.storage.stores import playbooks_in
from parallax.state.context import Context
from parallax.state.solve import SolveState


async def read_playbook(store: BaseStore | None, tenant: str, name: str) -> tuple[int, list[dict]]:
    """(version, active items) of the tenant's playbook head; (0, []) without a store or a playbook."""
    if store is None:
        return 0, []
    head = await playbooks_in(store, tenant).head(name)
    return head.version, [item.model_dump() for item in head.active]


async def route(state: SolveState, runtime: Runtime[Context]) -> dict:
    """Validate the input, pick the route, cut slices and read the playbook."""
    ctx = context_of(runtime)
    validate(state, ctx)
    question = state.get("question", "")
    mode = state.get("mode", "auto")
    chosen = choose_route(state["task"], question, ctx.slice_chars) if mode == "auto" else mode
    if "playbook_items" in state:
        version, items = state.get("playbook_version", 0), state["playbook_items"]
    else:
        tenant, name = state.get("tenant", "default"), state.get("playbook", "default")
        version, items = await read_playbook(runtime.store, tenant, name)
        if version == 0 and name != "default" and runtime.store is not None:
            raise InvalidInput(f"unknown playbook {name!r} for tenant {tenant!r}: learn or import it first, "
                               f"or leave playbook out to use 'default'")
    slices = split_into_slices(state["task"], ctx.slice_chars) if chosen == "section" else []
    branch_texts = [f"{question}\n{part}" for part in slices] or [f"{question}\n{state['task']}"]
    return {
        "trace_id": uuid.uuid4().hex,
        "mode": chosen,
        "slices": slices,
        "playbook_version": version,
        "playbook_items": items,
        "playbook_selections": await select_items(items, branch_texts, ctx.playbook_chars, ctx.embedder),
    }
