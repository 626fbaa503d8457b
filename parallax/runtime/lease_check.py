"""The lease check: a run that lost its lease calls no model and writes nothing more.

The runtime holds only the hook; the server installs the guard (parallax/server/lease_fence.py).
See docs/internals/process.md#the-lease-check and docs/deploy.md#faults-and-fencing.
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
    """`record` with the writing run's lease token (`_lease`), when there is one: the database
    refuses a stamped write whose token is older than the run's current lease
    (server/lease_fence.py), so a write that left before a partition and lands after another replica
    took the run over is dropped."""
    held = token()
    return {**record, LEASE_FIELD: held} if held else record


def written_before(record: dict[str, Any]) -> bool:
    """Whether a stored `record` was written by an earlier execution of the run writing now: the
    same server run under an older lease (a takeover running the run's last step again after its
    first end was written and before that end reached the checkpoint, e.g. across a database
    restart)."""
    held, earlier = token(), record.get(LEASE_FIELD)
    return bool(
        held
        and isinstance(earlier, dict)
        and earlier.get("run") == held["run"]
        and earlier.get("generation") != held["generation"]
    )


def unstamped(record: dict[str, Any]) -> dict[str, Any]:
    """`record` as its readers know it (without `_lease`)."""
    return (
        {k: v for k, v in record.items() if k != LEASE_FIELD} if LEASE_FIELD in record else record
    )


async def check_lease(what: str) -> None:
    """Return if this run may go on with `what` ("model call", "trace write", ...); raise LeaseLost
    if not."""
    if _guard is not None:
        await _guard(what)
