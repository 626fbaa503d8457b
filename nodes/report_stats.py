"""The `stats` graph's node: run metrics from the traces in the server's store
(logic/run_stats.py)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.graph_inputs import validate_stats_input
from parallax.logic.run_stats import parse_since, run_stats
from parallax.runtime.run_context import tenant_of
from parallax.runtime.storage.stores import traces_in
from parallax.state.context import Context
from parallax.state.data_loop import StatsState


async def report_stats(state: StatsState, runtime: Runtime[Context]) -> dict[str, Any]:
    validate_stats_input(state)
    tenant = tenant_of(state.get("tenant"))
    traces = await traces_in(runtime.store, tenant).traces()
    return {
        "tenant": tenant,
        **run_stats(
            traces, parse_since(state.get("since")), state.get("playbook"), state.get("version")
        ),
    }
