"""Aegra patch: the lease fence: a replica that lost a run's lease calls no model for it.

See docs/deploy.md#faults-and-fencing and docs/internals/server.md#the-lease-fence-lease_fencepy.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import weakref
from typing import Any

from prometheus_client import Counter

from parallax.runtime import lease_check

FENCE_KEY = "parallax_fence"
"""The config key of an execution's fence record (a dict Aegra copies for every execution)."""
MARGIN_S = 1.5
"""A confirmed lease is trusted until this long before it runs out."""
QUERY_TIMEOUT_S = 2.0
POLL_S = 0.5

log = logging.getLogger("parallax.lease_fence")
FENCED = Counter(
    "parallax_fenced_total",
    "Model calls and writes refused because the run's lease was lost.",
    ["what"],
)
WAITS = Counter(
    "parallax_fence_waits_total",
    "Fence checks that waited because the database could not confirm the lease.",
)

LEASE_QUERY = """
SELECT r.status, r.claimed_by, l.generation,
       EXTRACT(EPOCH FROM (r.lease_expires_at - now()))::float8
FROM runs r LEFT JOIN parallax_run_leases l ON l.run_id = r.run_id::text WHERE r.run_id = %s
"""


def process_prefix() -> str:
    """How this process's workers name themselves in runs.claimed_by (Aegra:
    '<host>-<pid>-worker-<n>')."""
    return f"{socket.gethostname()}-{os.getpid()}-worker-"


class LeaseState:
    """What one check learnt: (status, claimed_by, generation, seconds left), or None when the
    database did not answer."""

    def __init__(self, row: tuple[Any, ...]) -> None:
        self.status, self.claimed_by, self.generation, self.left_s = row[0], row[1], row[2], row[3]


_conns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


async def _read(run_id: str) -> LeaseState | None:
    """The run's lease as the database sees it now; None if it could not be read within
    QUERY_TIMEOUT_S."""
    import psycopg

    loop = asyncio.get_running_loop()
    conn = _conns.get(loop)
    try:
        async with asyncio.timeout(QUERY_TIMEOUT_S):
            if conn is None or conn.closed:
                conn = _conns[loop] = await psycopg.AsyncConnection.connect(
                    os.environ["DATABASE_URL"],
                    autocommit=True,
                    connect_timeout=int(QUERY_TIMEOUT_S),
                )
            row = await (await conn.execute(LEASE_QUERY, (run_id,))).fetchone()
    except (TimeoutError, psycopg.Error, OSError) as exc:
        log.warning("fence: cannot read the lease of run %s: %s", run_id, type(exc).__name__)
        _conns.pop(
            loop, None
        )  # a connection over a cut link may hang: drop it, never wait on its close
        return None
    return LeaseState(row) if row else LeaseState(("missing", None, None, None))


def _fence_record() -> tuple[str, dict[str, Any]] | None:
    from langgraph.config import get_config

    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # outside a graph run
        return None
    record, run_id = configurable.get(FENCE_KEY), configurable.get("run_id")
    if not isinstance(record, dict) or not run_id:
        return None
    return str(run_id), record


async def check(what: str) -> None:
    """The guard: return while this execution holds its run's lease; wait while that cannot be
    told."""
    found = _fence_record()
    if found is None or not os.environ.get("DATABASE_URL"):  # not a worker run of `parallax serve`
        return
    run_id, record = found
    if time.monotonic() < record.get("trusted_until", 0.0):
        return
    waited, lost_since = False, None
    while True:
        started = time.monotonic()
        state = await _read(run_id)
        if state is not None:
            if (
                "generation" not in record
                and state.status == "running"
                and state.claimed_by is None
                and state.generation is None
            ):  # run in process, leased by nobody (no Redis: Aegra's local executor)
                record["trusted_until"] = float("inf")
                return
            if (
                "generation" not in record
                and state.status == "running"
                and state.generation is not None
                and str(state.claimed_by or "").startswith(process_prefix())
            ):
                record.update(
                    generation=state.generation, claimed_by=state.claimed_by
                )  # this execution's token
            held = (
                state.status == "running"
                and record.get("generation") is not None
                and state.generation == record["generation"]
                and state.claimed_by == record["claimed_by"]
            )
            if held and state.left_s is not None:
                record["trusted_until"] = started + float(state.left_s) - MARGIN_S
                if time.monotonic() < record["trusted_until"]:
                    return
                # the lease is about to run out: the heartbeat renews it, or this replica has
                # trouble reaching the database
            elif not held:
                # another execution holds the run (or it went back to pending, or ended): call
                # nothing more, and let Aegra's heartbeat stop this execution as a lease loss
                if lost_since is None:
                    lost_since = time.monotonic()
                    FENCED.labels(what=what).inc()
                    log.warning(
                        "fence: run %s lost its lease (%s, claimed by %s, generation %s; this"
                        " execution had %s): no %s",
                        run_id,
                        state.status,
                        state.claimed_by,
                        state.generation,
                        record.get("generation"),
                        what,
                    )
        if state is None and not waited:
            waited = True
            WAITS.inc()
        await asyncio.sleep(POLL_S)


def token() -> dict[str, Any] | None:
    """This execution's lease token ({"run", "generation"}), once its first check has recorded
    it."""
    found = _fence_record()
    if found is None or found[1].get("generation") is None:
        return None
    return {"run": found[0], "generation": int(found[1]["generation"])}


def install() -> None:
    """Make `check` the guard of runtime/lease_check.py and `token` its stamp (at start, by
    server/aegra_patches.py: it relies on Aegra's worker names and on Aegra copying a graph's config
    for every execution)."""
    lease_check.install(check, token)
