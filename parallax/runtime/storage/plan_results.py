"""Finished plan tasks, kept in the store the moment each finishes, for dependants after a resume.

See docs/internals/storage.md#records-kept-for-a-resume.
"""

from __future__ import annotations

from typing import Any

from langgraph.store.base import BaseStore

from parallax.runtime.storage.namespaces import check_tenant, plan_results_namespace
from parallax.runtime.storage.store_calls import call_store, scan


class PlanResults:
    """One plan run's finished task records; without a store, nothing is kept (and nothing
    resumes)."""

    def __init__(self, store: BaseStore | None, tenant: str, trace_id: str) -> None:
        self.store, self.namespace = store, plan_results_namespace(check_tenant(tenant), trace_id)

    async def save(self, record: dict[str, Any]) -> None:
        if self.store is not None:
            await call_store(
                self.store,
                "put",
                self.namespace,
                f"{record['round']}.{record['id']}",
                record,
                index=False,
            )

    async def load(self, round_: int) -> dict[int, dict[str, Any]]:
        """Task id -> record of the tasks of `round_` that finished (in any process)."""
        if self.store is None:
            return {}
        found = await scan(self.store, self.namespace)
        return {record["id"]: record for record in found.values() if record.get("round") == round_}
