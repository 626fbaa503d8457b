"""Fencing: a run that lost its lease calls no model and writes nothing more.

Why this exists: on the deployed API a run is leased by one replica (Aegra's `runs.claimed_by`,
renewed by a heartbeat). A replica cut off from the database keeps running while its lease runs
out, and another replica takes the run over: without a fence both would call the model and write
the run's records. Every model call (runtime/structured_call.py, before the call and again before
its reply is used) and every write of a run's lasting records (a trace, a playbook version) first
awaits `check_lease`.

The runtime only holds the hook: the server installs the guard that knows about leases
(parallax/server/lease_fence.py: a lease generation in PostgreSQL that each new claim bumps), and the
token that stamps each trace and playbook record (`stamped`), which a trigger in PostgreSQL checks
against the run's current generation: a write already on its way when the lease was lost cannot
land after the takeover.

Under the CLI and `langgraph dev` nothing is installed and the check is free. A guard returns while
the run still holds its lease; otherwise it does not let the caller go on: the server's waits (while it
cannot tell, e.g. while the database is unreachable and the lease it last saw has run out, and once
another execution holds the run, until Aegra stops this one as a lease loss), and a guard may raise
`LeaseLost`, a CancelledError, so the caller stops as if cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

Guard = Callable[[str], Awaitable[None]]
Token = Callable[[], dict[str, Any] | None]

_guard: Guard | None = None
_token: Token | None = None
LEASE_FIELD = "_lease"
"""The field of a stored record that carries the writer's lease token, for the database to check."""


class LeaseLost(asyncio.CancelledError):
    """This execution of the run no longer holds its lease: another one has taken the run over."""


def install(guard: Guard | None, token: Token | None = None) -> None:
    """Make `guard` the check every model call and record write awaits, and `token` what stamps the
    records a run writes (None: no fencing)."""
    global _guard, _token
    _guard, _token = guard, token


def token() -> dict[str, Any] | None:
    """The writing run's lease token ({"run", "generation"}), None outside a fenced run."""
    return _token() if _token is not None else None


def stamped(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with the writing run's lease token (`_lease`), when there is one: the database refuses a
    stamped write whose token is older than the run's current lease (server/lease_fence.py), so a write
    that left before a partition and lands after another replica took the run over is dropped."""
    held = token()
    return {**record, LEASE_FIELD: held} if held else record


def written_before(record: dict[str, Any]) -> bool:
    """Whether a stored `record` was written by an earlier execution of the run writing now: the same server
    run under an older lease (a takeover running the run's last step again after its first end was written
    and before that end reached the checkpoint, e.g. across a database restart)."""
    held, earlier = token(), record.get(LEASE_FIELD)
    return bool(held and isinstance(earlier, dict) and earlier.get("run") == held["run"]
                and earlier.get("generation") != held["generation"])


def unstamped(record: dict[str, Any]) -> dict[str, Any]:
    """`record` as its readers know it (without `_lease`)."""
    return {k: v for k, v in record.items() if k != LEASE_FIELD} if LEASE_FIELD in record else record


async def check_lease(what: str) -> None:
    """Return if this run may go on with `what` ("model call", "trace write", ...); raise LeaseLost if not."""
    if _guard is not None:
        await _guard(what)
