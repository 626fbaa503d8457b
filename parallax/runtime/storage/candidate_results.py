"""Speculative candidates' replies, kept in the store the moment each model call finishes.

A run killed mid-check then only checks them again on resume.
See docs/internals/storage.md#records-kept-for-a-resume.
"""

from __future__ import annotations

from typing import cast

from langgraph.store.base import BaseStore

from parallax.runtime.storage.namespaces import candidates_namespace, check_tenant
from parallax.runtime.storage.store_calls import call_store
from parallax.state.records import BranchRecordData


class CandidateResults:
    """One run's generated candidates; without a store, nothing is kept (and a resume asks
    again)."""

    def __init__(self, store: BaseStore | None, tenant: str, trace_id: str) -> None:
        self.store, self.namespace = store, candidates_namespace(check_tenant(tenant), trace_id)

    async def save(self, candidate_id: str, record: BranchRecordData) -> None:
        if self.store is not None:
            await call_store(self.store, "put", self.namespace, candidate_id, record, index=False)

    async def load(self, candidate_id: str) -> BranchRecordData | None:
        if self.store is None:
            return None
        item = await call_store(self.store, "get", self.namespace, candidate_id)
        return cast(BranchRecordData, dict(item.value)) if item is not None else None
