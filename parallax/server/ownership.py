"""Users below the tenant: whose each thread, run, cron and store item is, and what only admins do.

See docs/deploy.md#users-and-jwts (the table) and docs/internals/server.md#callers-and-tenants.
"""

from __future__ import annotations

from typing import Any

from parallax.server.caller import Caller
from parallax.server.refusals import Refused

OWNER_USER = "parallax_user"
"""The metadata key of a thread's or a cron's user (absent: the tenant's administrator made it)."""
USER_SPACE = "by_user"
"""A user's store items live under [USER_SPACE, user, *namespace] of the tenant's."""
USER_READABLE = ("playbooks", "prompts")
"""Tenant namespaces a user may read (get, search, list): what the tenant's runs use, written by its
administrator."""
USER_GETS = ("traces",)
"""Tenant namespaces a user may read one item of by its key (a trace id a run of theirs answered).
"""
ADMIN_GRAPHS = {
    "release": "starts, decides or looks at a release of the tenant's playbook",
    "learn": "writes the tenant's playbooks and prompts",
    "loop": "learns from the tenant's runs and writes its playbooks",
    "stats": "reports on every user's traces",
}
"""Graphs only a tenant's administrator runs, and why."""


def admin_only(what: str) -> Refused:
    return Refused(
        403,
        f"{what} is for the tenant's administrator: use an API key, or a token whose role claim"
        " holds the administrator role",
    )


def thread_filter(caller: Caller) -> dict[str, Any]:
    """The metadata every thread the caller may see has (Aegra filters reads and searches on it)."""
    return (
        {"owner": caller.tenant}
        if caller.admin
        else {"owner": caller.tenant, OWNER_USER: caller.user}
    )


def stamped(metadata: dict[str, Any] | None, caller: Caller) -> dict[str, Any]:
    """A new thread's or cron's metadata with its owner set from the caller (a user's name, none for
    the administrator without one), whatever the request said."""
    marked = {k: v for k, v in (metadata or {}).items() if k != OWNER_USER}
    if caller.user is not None:
        marked[OWNER_USER] = caller.user
    return marked


def sees(caller: Caller, tenant: str | None, user: Any) -> bool:
    """Whether the caller may see a record of `tenant` made by `user` (None: by the
    administrator)."""
    return tenant == caller.tenant and (caller.admin or user == caller.user)


def check_graph(caller: Caller, graph: str | None, run_input: Any) -> None:
    """403 when a user starts a run only the administrator may start."""
    if caller.admin or graph is None:
        return
    if graph in ADMIN_GRAPHS:
        raise admin_only(f"the {graph} graph ({ADMIN_GRAPHS[graph]})")
    if graph == "feedback" and isinstance(run_input, dict) and run_input.get("correct") is not None:
        raise admin_only(
            "correcting an answer (feedback with `correct`, which a learn run takes as the target)"
        )


def user_namespace(caller: Caller, namespace: list[str]) -> list[str]:
    """Where a user's namespace is kept (the administrator's as it is)."""
    if caller.admin or caller.user is None:
        return namespace
    return [USER_SPACE, caller.user, *namespace]


def as_seen(caller: Caller, namespace: list[str]) -> list[str]:
    """A stored user namespace as its user wrote it (the administrator sees the whole path)."""
    if caller.admin or caller.user is None:
        return namespace
    head = [USER_SPACE, caller.user]
    return namespace[2:] if namespace[:2] == head else namespace


async def claim_thread(thread_id: str, caller: Caller) -> None:
    """Create the thread a user's run names before Aegra would (it creates a missing one with no
    user), so it is the user's from its first run. Nothing happens for an administrator or a thread
    that exists."""
    if caller.admin or caller.user is None:
        return
    import json

    from parallax.server.connections import connection

    metadata = json.dumps({"owner": caller.tenant, OWNER_USER: caller.user})
    async with connection() as conn:
        await conn.execute(
            "INSERT INTO thread (thread_id, status, metadata_json, user_id) "
            "VALUES (%s, 'idle', %s::jsonb, %s) ON CONFLICT (thread_id) DO NOTHING",
            (thread_id, metadata, caller.tenant),
        )


async def thread_user(thread_id: str) -> tuple[str | None, Any]:
    """(tenant, user) of a thread; (None, None): no such thread."""
    from parallax.server.connections import connection

    async with connection() as conn:
        row = await (
            await conn.execute(
                "SELECT user_id, metadata_json->>%s FROM thread WHERE thread_id = %s",
                (OWNER_USER, thread_id),
            )
        ).fetchone()
    return (None, None) if row is None else (str(row[0]), row[1])


async def cron_user(cron_id: str) -> tuple[str | None, Any]:
    """(tenant, user) of a cron; (None, None): no such cron."""
    from parallax.server.connections import connection

    async with connection() as conn:
        row = await (
            await conn.execute(
                "SELECT user_id, metadata->>%s FROM crons WHERE cron_id::text = %s",
                (OWNER_USER, cron_id),
            )
        ).fetchone()
    return (None, None) if row is None else (str(row[0]), row[1])


RESERVED_IDS = frozenset({"search", "count", "prune"})
"""Path words where a thread's or a cron's id would be: routes over many records, filtered by their
handlers."""


ASSISTANT_READS = frozenset({"search", "count", "versions"})
"""POST routes under /assistants that only read (a user may call them)."""


async def check_path(caller: Caller, method: str, path: str, payload: Any) -> bool:
    """A user's request under /threads/{id} or /runs/crons/{id} that is not theirs: 404, as another
    tenant's is; a user's cron search or count: filtered to their crons (True: `payload` was changed
    so). Nothing for the tenant's administrator."""
    if caller.admin:
        return False
    parts = path.strip("/").split("/")
    if (
        parts[0] == "assistants"
        and method in ("POST", "PATCH", "PUT", "DELETE")
        and parts[-1] not in ASSISTANT_READS
    ):
        raise admin_only("changing the tenant's assistants (every user's runs use them)")
    if len(parts) >= 2 and parts[0] == "threads" and parts[1] not in RESERVED_IDS:
        tenant, user = await thread_user(parts[1])
        if tenant is not None and not sees(caller, tenant, user):
            raise Refused(404, f"Thread '{parts[1]}' not found")
    elif len(parts) == 3 and parts[:2] == ["runs", "crons"]:
        if parts[2] in RESERVED_IDS:
            if method == "POST" and isinstance(payload, dict):
                given = payload.get("metadata")
                payload["metadata"] = {
                    **(given if isinstance(given, dict) else {}),
                    OWNER_USER: caller.user,
                }
                return True
            return False
        tenant, user = await cron_user(parts[2])
        if tenant is not None and not sees(caller, tenant, user):
            raise Refused(404, f"Cron '{parts[2]}' not found")
    return False


async def cron_metadata(caller: Caller, metadata: Any, cron_id: str | None) -> Any:
    """A cron's metadata as stored: a new cron's stamped with its user; an update's (Aegra replaces
    the whole) keeping the user the cron has."""
    if not isinstance(metadata, dict):
        return metadata
    if cron_id is None:
        return stamped(metadata, caller)
    _, user = await cron_user(cron_id)
    kept = {k: v for k, v in metadata.items() if k != OWNER_USER}
    return {**kept, OWNER_USER: user} if user is not None else kept
