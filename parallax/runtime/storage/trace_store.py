"""Traces and the dead-letter list, per tenant, with each trace's feedback and target.

See docs/internals/storage.md#traces-and-dead-letters.
"""

from __future__ import annotations

from typing import Any, cast

from langgraph.store.base import BaseStore
from typing_extensions import TypedDict

from parallax.runtime import lease_check
from parallax.runtime.redaction import redact_value
from parallax.runtime.run_context import authenticated_user
from parallax.runtime.storage.commit_locks import CommitLock, LocalLock
from parallax.runtime.storage.namespaces import (
    NotFound,
    check_tenant,
    dead_letters_namespace,
    traces_namespace,
)
from parallax.runtime.storage.store_calls import call_store, scan
from parallax.runtime.timestamps import now_iso
from parallax.state.records import BranchRecordData
from parallax.state.trace_record import DeadLetter, Outcome, TraceRecord, as_trace

SHORT_PREFIX = 6
"""Fewest characters of a trace id that `get_trace` looks up as a prefix (tables show 8)."""


SAME_END = ("answer", "status", "confidence", "mode", "votes")
"""What a trace written again must repeat for the first one to stand as the run's end."""


class TraceOwner(TypedDict):
    """The trace a dead letter names: a run's own, or the plan's that a task's run is part of."""

    trace_id: str
    tenant: str


class TraceStore:
    """One tenant's traces and dead letters; it cannot name another tenant's records."""

    def __init__(
        self, store: BaseStore, tenant: str = "default", lock: CommitLock | None = None
    ) -> None:
        self.store, self.tenant, self.lock = store, check_tenant(tenant), lock or LocalLock()

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await call_store(self.store, method, *args, **kwargs)

    async def _get(self, namespace: tuple[str, ...], key: str) -> dict[str, Any] | None:
        """A record as its readers know it: without the lease stamp it was written with
        (runtime/lease_check.py)."""
        item = await self._call("get", namespace, key)
        return None if item is None else lease_check.unstamped(dict(item.value))

    async def _scan(self, namespace: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """Every record of `namespace`, key -> value, without lease stamps."""
        return {
            key: lease_check.unstamped(value)
            for key, value in (await scan(self.store, namespace)).items()
        }

    # --- traces ----------------------------------------------------------------------

    async def put_trace(self, trace: TraceRecord) -> bool:
        """Write a run's trace (its end); False when it was not written because this run already
        ended with it.

        A trace is a run's last write: a takeover that runs the run's last step again (its first
        execution wrote the trace, then lost the database before the checkpoint after it) finds the
        trace an earlier execution of the same server run wrote (runtime/lease_check.py
        `written_before`) and, when it records the same outcome (answer, status, confidence), leaves
        it: the run ends once. A different outcome (the takeover redid earlier steps and they came
        out otherwise) is written over it, and the database's trigger keeps that handover
        (server/lease_fence.py)."""
        await lease_check.check_lease(
            "trace write"
        )  # a run taken over by another replica writes no trace here
        # the id is the record's key, never redacted (a hex id can look like a card number to the
        # redactor)
        record = {**redact_value(trace), "trace_id": trace["trace_id"]}
        if (
            user := authenticated_user()[0]
        ) is not None:  # the user below the tenant whose run it is
            record["user"] = user
        namespace = traces_namespace(self.tenant)
        if (
            lease_check.token() is not None
            and (item := await self._call("get", namespace, trace["trace_id"])) is not None
            and lease_check.written_before(item.value)
            and all(item.value.get(k) == record.get(k) for k in SAME_END)
        ):
            return False
        await self._call(
            "put", namespace, trace["trace_id"], lease_check.stamped(record), index=False
        )
        return True

    async def get_trace(self, trace_id: str) -> TraceRecord:
        """The trace with this id, or with this id's start (the short id tables show: at least
        SHORT_PREFIX characters, and only one trace of the tenant may start with it). A run started
        by a user below the tenant finds only that user's traces (server/ownership.py); its
        administrator's, every trace of the tenant.
        """
        user, admin = authenticated_user()
        trace = await self._get(traces_namespace(self.tenant), trace_id)
        if trace is not None and (admin or trace.get("user") == user):
            return as_trace(trace, trace_id)
        if len(trace_id) >= SHORT_PREFIX:
            scanned = await self._scan(traces_namespace(self.tenant))
            found = [
                as_trace(t, key)
                for key, t in scanned.items()
                if key.startswith(trace_id) and (admin or t.get("user") == user)
            ]
            if len(found) == 1:
                return found[0]
            if found:
                raise NotFound(
                    f"{len(found)} traces of tenant {self.tenant!r} start with {trace_id!r}: "
                    "give more of the id (--json shows it whole)"
                )
        raise NotFound(
            f"no trace {trace_id!r} for tenant {self.tenant!r}: "
            "use the trace id `parallax run` printed (and the same --tenant)"
        )

    async def traces(self) -> list[TraceRecord]:
        """Every trace of the tenant, oldest first."""
        scanned = await self._scan(traces_namespace(self.tenant))
        found = [as_trace(t, key) for key, t in scanned.items()]
        return sorted(found, key=lambda t: (t.get("created_at", ""), t["trace_id"]))

    async def add_feedback(
        self, trace_id: str, entry: dict[str, Any]
    ) -> tuple[TraceRecord, TraceRecord]:
        """Append a (redacted) feedback entry to a trace; (the trace before, the trace after).
        An unknown trace raises StoreError and writes nothing."""
        trace_id = (await self.get_trace(trace_id))["trace_id"]  # a short id names its whole one
        async with self.lock.hold(f"feedback/{self.tenant}/{trace_id}"):
            before = await self.get_trace(trace_id)
            after = as_trace(
                {
                    **before,
                    "feedback": [
                        *before.get("feedback", []),
                        redact_value({**entry, "at": now_iso()}),
                    ],
                }
            )
            await self._call("put", traces_namespace(self.tenant), trace_id, after, index=False)
            return before, after

    async def set_outcome(self, trace_id: str, outcome: Outcome) -> tuple[TraceRecord, TraceRecord]:
        """Set a trace's `target`, `correct` and `scorer` (redacted); (the trace before, the trace
        after). An unknown trace raises StoreError and writes nothing."""
        trace_id = (await self.get_trace(trace_id))["trace_id"]  # a short id names its whole one
        async with self.lock.hold(f"feedback/{self.tenant}/{trace_id}"):
            before = await self.get_trace(trace_id)
            verdict = {k: outcome[k] for k in ("target", "correct", "scorer")}
            after = as_trace({**before, **redact_value(verdict)})
            await self._call("put", traces_namespace(self.tenant), trace_id, after, index=False)
            return before, after

    # --- dead letters ------------------------------------------------------------------

    async def put_dead_letter(self, letter: DeadLetter) -> None:
        await lease_check.check_lease("dead letter write")
        await self._call(
            "put",
            dead_letters_namespace(self.tenant),
            letter["id"],
            lease_check.stamped(dict(letter)),
            index=False,
        )

    async def get_dead_letter(self, branch_id: str) -> DeadLetter:
        letter = await self._get(dead_letters_namespace(self.tenant), branch_id)
        if letter is None:
            raise NotFound(
                f"no dead letter {branch_id!r} for tenant {self.tenant!r}: see `parallax dlq list`"
            )
        return cast(DeadLetter, letter)

    async def dead_letters(self) -> list[DeadLetter]:
        """Every dead letter of the tenant, oldest first."""
        found = await self._scan(dead_letters_namespace(self.tenant))
        letters = cast(list[DeadLetter], list(found.values()))
        return sorted(letters, key=lambda d: (d["escalated_at"], d["id"]))


def dead_letter(record: BranchRecordData, trace: TraceOwner) -> DeadLetter:
    """The dead-letter entry of one escalated branch record."""
    return {
        "id": record["id"],
        "trace_id": trace["trace_id"],
        "tenant": trace["tenant"],
        "kind": record["kind"],
        "input": record.get("input"),
        "error": redact_value(record.get("error") or record["status"]),
        "attempts": record.get("attempts", 0),
        "escalated_at": now_iso(),
        "status": "open",
        "retries": [],
    }
