"""Which stored runs have taught which playbook, so that no run teaches one playbook twice.

Rounds claim runs under the commit lock, mark them consumed once their batch is committed, and put
off runs whose reflection failed. See docs/data-loop.md and docs/internals/storage.md#consumed-runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import NamedTuple, TypeGuard, cast

from langgraph.store.base import BaseStore

from parallax.runtime.storage.commit_locks import CommitLock
from parallax.runtime.storage.namespaces import check_playbook_name, check_tenant
from parallax.runtime.storage.store_calls import call_store, scan
from parallax.state.trace_claims import ClaimOutcomes, ClaimRecord, FailureNote, ReflectionFailure

MAX_FAILURES = 3
"""Counted failures after which a run is given up as unlearnable. Why: a run the model can never
reflect on (a model too small to write the reflection's JSON, a run whose reply always runs past the
token limit) would otherwise be asked again every round, for ever; one unusable reply may be chance
(sampling at temperature 0.3), three in three rounds is the run or the model, and a run given up
costs one lesson at most."""

RETRY_S = 3600.0
"""How long a run waits after its second failure in a row (the first retry waits for nothing): the
loop's default period (`loop install --every 1h`); each further failure doubles it."""
RETRY_MAX_S = 86400.0
"""The longest a run waits between two tries: a day, so a run put off by a long outage is tried
daily once the endpoint is back, and learned within a day."""


def now() -> datetime:
    """The time claims, leases and retries are measured by (one place, so a test can move it)."""
    return datetime.now(UTC)


def stamp(at: datetime) -> str:
    return at.isoformat(timespec="microseconds")


def retry_after_s(failed_tries: int) -> float:
    """How long a run whose reflection failed `failed_tries` times in a row waits before a round may
    take it again."""
    return 0.0 if failed_tries <= 1 else min(RETRY_S * 2 ** (failed_tries - 2), RETRY_MAX_S)


class Claim(NamedTuple):
    """What `ConsumedStore.claim` did with the ids it was given."""

    ids: list[str]
    """The ids claimed."""
    taken: int
    """How many were taken already: consumed, or claimed by a round whose claim holds."""
    recovered: int
    """How many of those this call consumed for a round that died after its commit."""
    waiting: int
    """How many were put off after failed reflections (`not_before` still ahead)."""


def consumed_namespace(tenant: str, playbook: str) -> tuple[str, str, str]:
    return ("consumed", tenant, playbook)


class ConsumedStore:
    """The runs one tenant's playbook has claimed or learned from."""

    def __init__(self, store: BaseStore, lock: CommitLock, tenant: str, playbook: str) -> None:
        self.store, self.lock = store, lock
        self.tenant, self.playbook = check_tenant(tenant), check_playbook_name(playbook)
        self.namespace = consumed_namespace(self.tenant, self.playbook)

    async def records(self) -> dict[str, ClaimRecord]:
        """trace id -> its record."""
        return cast(dict[str, ClaimRecord], await scan(self.store, self.namespace))

    @staticmethod
    def taken(record: ClaimRecord | None, at: datetime) -> bool:
        """Consumed, or claimed by a round whose claim has not expired."""
        if record is None:
            return False
        return record["state"] == "consumed" or datetime.fromisoformat(record["until"]) > at

    @classmethod
    def waiting(cls, record: ClaimRecord | None, at: datetime) -> bool:
        """Released after a failed reflection and put off: no round may take it before
        `not_before`."""
        return (
            record is not None
            and not cls.taken(record, at)
            and record.get("not_before") is not None
            and datetime.fromisoformat(record["not_before"]) > at
        )

    async def claim(
        self,
        trace_ids: Sequence[str],
        round_id: str,
        limit: int | None,
        lease_s: float,
        settle: Callable[[str], Awaitable[bool]] | None = None,
    ) -> Claim:
        """Claim, in the order given, up to `limit` of `trace_ids` not taken by a round nor put off.

        A run whose expired claim names a commit key is settled first: `settle(key)` says whether
        the playbook holds the key and, when it does not, gives the key up for good
        (docs/data-loop.md); without `settle` (a caller that never commits) keys are not looked at.
        """
        unique = list(dict.fromkeys(trace_ids))
        settled = await self._settle_keys(
            unique, settle
        )  # before the lock: settling takes the playbook's lock
        async with self.lock.hold(f"consumed/{self.tenant}/{self.playbook}"):
            at = now()
            records = await self.records()
            finished = await self._finish_dead_commits(unique, records, at, settled)
            # a key named since the settling above (its claim expired meanwhile) waits for the next
            # claim to settle it
            unsettled = {
                t
                for t in unique
                if settle is not None
                and (key := self._dead_key(records.get(t), at)) is not None
                and key not in settled
            }
            waiting = {t for t in unique if self.waiting(records.get(t), at)}
            free = [
                t
                for t in unique
                if not self.taken(records.get(t), at) and t not in unsettled | waiting
            ]
            chosen = free if limit is None else free[:limit]
            until = stamp(at + timedelta(seconds=lease_s))
            for trace_id in chosen:
                # an expired claim keeps its failures (the count runs across rounds), not its dead
                # round's key
                kept = {k: v for k, v in records.get(trace_id, {}).items() if k != "commit_key"}
                claimed: ClaimRecord = {
                    **cast(ClaimRecord, kept),
                    "trace_id": trace_id,
                    "state": "claimed",
                    "round": round_id,
                    "at": stamp(at),
                    "until": until,
                }
                await call_store(
                    self.store,
                    "put",
                    self.namespace,
                    trace_id,
                    claimed,
                    index=False,
                )
            return Claim(chosen, len(unique) - len(free) - len(waiting), finished, len(waiting))

    def _dead_key(self, record: ClaimRecord | None, at: datetime) -> str | None:
        """The commit key an expired claim names, or None."""
        if (
            record is None
            or record["state"] != "claimed"
            or self.taken(record, at)
            or not record.get("commit_key")
        ):
            return None
        return str(record["commit_key"])

    async def _settle_keys(
        self, trace_ids: list[str], settle: Callable[[str], Awaitable[bool]] | None
    ) -> dict[str, bool]:
        """Settle the keys the expired claims of `trace_ids` name: key -> whether the playbook holds
        it."""
        if settle is None:
            return {}
        records, at = await self.records(), now()
        keys = {key for t in trace_ids if (key := self._dead_key(records.get(t), at)) is not None}
        return {key: await settle(key) for key in sorted(keys)}

    async def _finish_dead_commits(
        self,
        trace_ids: list[str],
        records: dict[str, ClaimRecord],
        at: datetime,
        settled: dict[str, bool],
    ) -> int:
        """Consume (in `records` too) the runs whose expired claim names a commit key the playbook
        holds: their round committed what it learned from them and died (or stalled) before marking
        them. How many. Under the lock."""
        finished = 0
        for trace_id in trace_ids:
            key = self._dead_key(records.get(trace_id), at)
            if key is not None and settled.get(key):
                records[trace_id] = {
                    **records[trace_id],
                    "state": "consumed",
                    "outcome": "learned",
                    "at": stamp(at),
                }
                await call_store(
                    self.store, "put", self.namespace, trace_id, records[trace_id], index=False
                )
                finished += 1
        return finished

    @staticmethod
    def _owns(record: ClaimRecord | None, round_id: str) -> TypeGuard[ClaimRecord]:
        """The round's claim still stands: no other round has claimed the run since, and it is not
        consumed. (It may have expired: until another round claims the run, the lock makes it the
        round's still.)"""
        return record is not None and record["round"] == round_id and record["state"] == "claimed"

    async def _rewrite_own(
        self,
        trace_ids: Iterable[str],
        round_id: str,
        change: Callable[[str, ClaimRecord], ClaimRecord],
    ) -> list[ClaimRecord]:
        """Under the lock, write `change(trace id, record)` over the round's own claims among
        `trace_ids`; claims another round holds now (this one's expired and were taken) and consumed
        runs are left alone. The records written."""
        written: list[ClaimRecord] = []
        async with self.lock.hold(f"consumed/{self.tenant}/{self.playbook}"):
            records = await self.records()
            for trace_id in trace_ids:
                if self._owns(record := records.get(trace_id), round_id):
                    written.append(change(trace_id, record))
                    await call_store(
                        self.store, "put", self.namespace, trace_id, written[-1], index=False
                    )
        return written

    async def committing(
        self, trace_ids: Sequence[str], round_id: str, key: str, lease_s: float
    ) -> list[str]:
        """Before the round commits under `key`: when it still owns every claim of `trace_ids`,
        write the key on them and renew their lease (so a round that dies between its commit and
        `consume` has its runs consumed by the next claim), and return []; else write nothing and
        return the ids another round has claimed (or consumed) since: the round must commit nothing
        learned from this batch (docs/data-loop.md)."""
        async with self.lock.hold(f"consumed/{self.tenant}/{self.playbook}"):
            at, records = now(), await self.records()
            if lost := [t for t in trace_ids if not self._owns(records.get(t), round_id)]:
                return lost
            until = stamp(at + timedelta(seconds=lease_s))
            for trace_id in trace_ids:
                await call_store(
                    self.store,
                    "put",
                    self.namespace,
                    trace_id,
                    {**records[trace_id], "commit_key": key, "until": until},
                    index=False,
                )
            return []

    async def consume(self, trace_ids: Sequence[str], round_id: str) -> int:
        """Mark the round's claimed runs consumed; how many were."""
        return len(
            await self._rewrite_own(
                trace_ids,
                round_id,
                lambda _, record: {
                    **record,
                    "state": "consumed",
                    "outcome": "learned",
                    "at": stamp(now()),
                },
            )
        )

    async def release(self, failed: Mapping[str, ReflectionFailure], round_id: str) -> list[str]:
        """End the round's claims on runs whose reflection failed, `failed`: trace id -> {"cause",
        "error", "counts"}, and put them off (`not_before`) for the next try; a counted failure that
        reaches MAX_FAILURES consumes the run as unlearnable instead. The ids given up."""

        def failed_once(trace_id: str, record: ClaimRecord) -> ClaimRecord:
            failure, at = failed[trace_id], now()
            failures = int(record.get("failures", 0)) + bool(failure["counts"])
            tries = int(record.get("failed_tries", 0)) + 1
            last: FailureNote = {
                "cause": failure["cause"],
                "error": failure["error"],
                "round": round_id,
                "at": stamp(at),
            }
            record = {
                **record,
                "failures": failures,
                "failed_tries": tries,
                "last_failure": last,
                "at": stamp(at),
                "until": stamp(at),
                "not_before": stamp(at + timedelta(seconds=retry_after_s(tries))),
            }
            if failures >= MAX_FAILURES:
                record["state"] = "consumed"
                record["outcome"] = "unlearnable"
                record["reason"] = failure["error"]
            return record

        written = await self._rewrite_own(list(failed), round_id, failed_once)
        return [r["trace_id"] for r in written if r["state"] == "consumed"]

    async def outcomes(self) -> ClaimOutcomes:
        """How many runs were learned from, given up as unlearnable, are claimed now, are put off
        after failed reflections (`waiting`, the first of them free again at `next_try_at`), and
        wait to be taken again (`to_retry`: a claim that ended without the run being learned, free
        now)."""
        at, records = now(), list((await self.records()).values())
        counts: Counter[str] = Counter(
            (
                r.get("outcome", "learned")
                if r["state"] == "consumed"
                else (
                    "claimed"
                    if self.taken(r, at)
                    else "waiting"
                    if self.waiting(r, at)
                    else "to_retry"
                )
            )
            for r in records
        )
        put_off = [r["not_before"] for r in records if self.waiting(r, at)]
        return {
            "learned": counts["learned"],
            "unlearnable": counts["unlearnable"],
            "claimed": counts["claimed"],
            "waiting": counts["waiting"],
            "to_retry": counts["to_retry"],
            "next_try_at": min(put_off, key=datetime.fromisoformat) if put_off else None,
        }
