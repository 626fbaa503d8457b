"""Which stored runs have taught which playbook: so no run teaches one playbook twice.

One record per (tenant, playbook, trace) in ("consumed", tenant, playbook), keyed by trace id:

    {"trace_id", "state": "claimed" | "consumed", "round", "at", "until"}

A learning round first *claims* the runs it will reflect on, under the store's commit lock
(runtime/storage/commit_locks.py: an advisory lock in PostgreSQL across replicas, a file lock
for CLI processes sharing a SQLite file), so two rounds running at once split the runs
between them instead of both taking them. When its batch is committed (or rejected) the
round marks them *consumed*, for good. A claim whose round died (killed mid-way) expires at
`until` and the next round takes the runs again: nothing is lost, nothing is learned twice.
The tenant is part of the namespace, so one tenant's runs can never be claimed for another's
playbook.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import BaseStore

from parallax.runtime.storage.commit_locks import CommitLock
from parallax.runtime.storage.namespaces import check_playbook_name, check_tenant
from parallax.runtime.storage.store_calls import call_store, now_iso, scan


def consumed_namespace(tenant: str, playbook: str) -> tuple[str, str, str]:
    return ("consumed", tenant, playbook)


class ConsumedStore:
    """The runs one tenant's playbook has claimed or learned from."""

    def __init__(self, store: BaseStore, lock: CommitLock, tenant: str, playbook: str) -> None:
        self.store, self.lock = store, lock
        self.tenant, self.playbook = check_tenant(tenant), check_playbook_name(playbook)
        self.namespace = consumed_namespace(self.tenant, self.playbook)

    async def records(self) -> dict[str, dict[str, Any]]:
        """trace id -> its record."""
        return await scan(self.store, self.namespace)

    @staticmethod
    def taken(record: dict[str, Any] | None, now: datetime) -> bool:
        """Consumed, or claimed by a round whose claim has not expired."""
        if record is None:
            return False
        return record["state"] == "consumed" or datetime.fromisoformat(record["until"]) > now

    async def claim(self, trace_ids: Sequence[str], round_id: str, limit: int | None,
                    lease_s: float) -> tuple[list[str], int]:
        """Claim, in the order given, up to `limit` of `trace_ids` that no round has taken; (the ids claimed,
        how many of `trace_ids` were taken already)."""
        async with self.lock.hold(f"consumed/{self.tenant}/{self.playbook}"):
            now = datetime.now(UTC)
            records = await self.records()
            free = [t for t in dict.fromkeys(trace_ids) if not self.taken(records.get(t), now)]
            chosen = free if limit is None else free[:limit]
            until = (now + timedelta(seconds=lease_s)).isoformat(timespec="microseconds")
            for trace_id in chosen:
                await call_store(self.store, "put", self.namespace, trace_id,
                                 {"trace_id": trace_id, "state": "claimed", "round": round_id, "at": now_iso(),
                                  "until": until}, index=False)
            return chosen, len(set(trace_ids)) - len(free)

    async def consume(self, trace_ids: Sequence[str], round_id: str) -> int:
        """Mark the round's claimed runs consumed; how many were. A claim that expired and was taken by
        another round is that round's now, and left alone."""
        done = 0
        async with self.lock.hold(f"consumed/{self.tenant}/{self.playbook}"):
            records = await self.records()
            for trace_id in trace_ids:
                record = records.get(trace_id)
                if record is None or record["round"] != round_id or record["state"] == "consumed":
                    continue
                await call_store(self.store, "put", self.namespace, trace_id,
                                 {**record, "state": "consumed", "at": now_iso()}, index=False)
                done += 1
        return done
