"""Which stored runs have taught which playbook: so no run teaches one playbook twice.

One record per (tenant, playbook, trace) in ("consumed", tenant, playbook), keyed by trace id:

    {"trace_id", "state": "claimed" | "consumed", "round", "at", "until", "commit_key",
     "outcome": "learned" | "unlearnable" (consumed only), "failures", "last_failure", "reason"}

A learning round first *claims* the runs it will reflect on, under the store's commit lock
(runtime/storage/commit_locks.py: an advisory lock in PostgreSQL across replicas, a file lock
for CLI processes sharing a SQLite file), so two rounds running at once split the runs
between them instead of both taking them. When its batch is committed (or rejected) the
round marks them *consumed*, for good. A claim whose round died (killed mid-way) expires at
`until` and the next round takes the runs again: nothing is lost, nothing is learned twice.

The commit and the marking are two writes, and a round may die between them. So before it
commits, the round writes on its claims the key it will commit under (`commit_key`: playbook
commits are idempotent by it, runtime/storage/playbook_store.py). A later claim of a run whose
expired claim names a key the playbook holds (a version or a rejected candidate) marks the run
consumed for the dead round instead of handing it out; a key the playbook does not hold (the
round died before its commit) is dropped and the run is taken again.
The tenant is part of the namespace, so one tenant's runs can never be claimed for another's
playbook.

A run whose reflection failed is *released*: its claim ends at once, so the next round may try
it again, and the failure is kept (`last_failure`: cause, error, round). A failure the caller
counts (a reply that came back and could not be used, not an endpoint that was down:
logic/trace_learning.py decides) adds one to `failures`; at MAX_FAILURES the run is consumed
with `outcome: "unlearnable"` and the last error as its `reason`, and no round takes it again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import BaseStore

from parallax.runtime.storage.commit_locks import CommitLock
from parallax.runtime.storage.namespaces import check_playbook_name, check_tenant
from parallax.runtime.storage.store_calls import call_store, now_iso, scan

MAX_FAILURES = 3
"""Counted failures after which a run is given up as unlearnable. Why: a run the model can never reflect on (a
model too small to write the reflection's JSON, a run whose reply always runs past the token limit) would
otherwise be asked again every round, for ever; one unusable reply may be chance (sampling at temperature 0.3),
three in three rounds is the run or the model, and a run given up costs one lesson at most."""


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

    async def claim(self, trace_ids: Sequence[str], round_id: str, limit: int | None, lease_s: float,
                    committed: Callable[[str], Awaitable[bool]] | None = None) -> tuple[list[str], int, int]:
        """Claim, in the order given, up to `limit` of `trace_ids` that no round has taken; (the ids claimed,
        how many of `trace_ids` were taken already, how many of those this call consumed for a round that died
        after its commit: `committed(key)` says whether the playbook holds a commit key)."""
        async with self.lock.hold(f"consumed/{self.tenant}/{self.playbook}"):
            now = datetime.now(UTC)
            records = await self.records()
            unique = list(dict.fromkeys(trace_ids))
            finished = await self._finish_dead_commits(unique, records, now, committed)
            free = [t for t in unique if not self.taken(records.get(t), now)]
            chosen = free if limit is None else free[:limit]
            until = (now + timedelta(seconds=lease_s)).isoformat(timespec="microseconds")
            for trace_id in chosen:
                # an expired claim keeps its failures (the count runs across rounds), not its dead round's key
                kept = {k: v for k, v in records.get(trace_id, {}).items() if k != "commit_key"}
                await call_store(self.store, "put", self.namespace, trace_id,
                                 {**kept, "trace_id": trace_id, "state": "claimed",
                                  "round": round_id, "at": now_iso(), "until": until}, index=False)
            return chosen, len(unique) - len(free), finished

    async def _finish_dead_commits(self, trace_ids: list[str], records: dict[str, dict[str, Any]], now: datetime,
                                   committed: Callable[[str], Awaitable[bool]] | None) -> int:
        """Consume (in `records` too) the runs whose expired claim names a commit key the playbook holds: their
        round committed what it learned from them and died before marking them. How many. Under the lock."""
        known: dict[str, bool] = {}
        finished = 0
        for trace_id in trace_ids:
            record = records.get(trace_id)
            if committed is None or record is None or self.taken(record, now) or not record.get("commit_key"):
                continue
            key = str(record["commit_key"])
            if key not in known:
                known[key] = await committed(key)
            if known[key]:
                records[trace_id] = {**record, "state": "consumed", "outcome": "learned", "at": now_iso()}
                await call_store(self.store, "put", self.namespace, trace_id, records[trace_id], index=False)
                finished += 1
        return finished

    async def _rewrite_own(self, trace_ids: Iterable[str], round_id: str,
                           change: Callable[[str, dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
        """Under the lock, write `change(trace id, record)` over the round's own claims among `trace_ids`; claims
        another round holds now (this one's expired and were taken) and consumed runs are left alone. The records
        written."""
        written = []
        async with self.lock.hold(f"consumed/{self.tenant}/{self.playbook}"):
            records = await self.records()
            for trace_id in trace_ids:
                record = records.get(trace_id)
                if record is None or record["round"] != round_id or record["state"] == "consumed":
                    continue
                written.append(change(trace_id, record))
                await call_store(self.store, "put", self.namespace, trace_id, written[-1], index=False)
        return written

    async def committing(self, trace_ids: Sequence[str], round_id: str, key: str) -> None:
        """Write on the round's claims of `trace_ids` the key it is about to commit under, before the commit, so
        a round that dies between its commit and `consume` has its runs consumed by the next claim (module
        docstring)."""
        await self._rewrite_own(trace_ids, round_id, lambda _, record: {**record, "commit_key": key})

    async def consume(self, trace_ids: Sequence[str], round_id: str) -> int:
        """Mark the round's claimed runs consumed; how many were."""
        return len(await self._rewrite_own(trace_ids, round_id, lambda _, record: {
            **record, "state": "consumed", "outcome": "learned", "at": now_iso()}))

    async def release(self, failed: Mapping[str, dict[str, Any]], round_id: str) -> list[str]:
        """End the round's claims on runs whose reflection failed, `failed`: trace id -> {"cause", "error",
        "counts"}, so the next round may try them again; a counted failure that reaches MAX_FAILURES consumes the
        run as unlearnable instead. The ids given up."""

        def failed_once(trace_id: str, record: dict[str, Any]) -> dict[str, Any]:
            failure, now = failed[trace_id], now_iso()
            failures = int(record.get("failures", 0)) + bool(failure["counts"])
            last = {"cause": failure["cause"], "error": failure["error"], "round": round_id, "at": now}
            record = {**record, "failures": failures, "last_failure": last, "at": now, "until": now}
            if failures >= MAX_FAILURES:
                record.update(state="consumed", outcome="unlearnable", reason=failure["error"])
            return record

        written = await self._rewrite_own(list(failed), round_id, failed_once)
        return [r["trace_id"] for r in written if r["state"] == "consumed"]

    async def outcomes(self) -> dict[str, int]:
        """How many runs were learned from, given up as unlearnable, are claimed now, and wait to be taken again
        (a claim that ended without the run being learned: its reflection failed, or its round died)."""
        now = datetime.now(UTC)
        counts: Counter[str] = Counter(
            r.get("outcome", "learned") if r["state"] == "consumed" else "claimed" if self.taken(r, now)
            else "to_retry" for r in (await self.records()).values())
        return {k: counts[k] for k in ("learned", "unlearnable", "claimed", "to_retry")}
