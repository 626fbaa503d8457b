"""Aegra hook (`auth`): who may see what on the graph API, and how many runs a tenant may queue.

The caller admission resolved becomes Aegra's user (the tenant, as `parallax_tenant`); the handlers
keep tenants and users apart. See docs/internals/server.md#callers-and-tenants.
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

from parallax.runtime import settings as settings_mod
from parallax.runtime.run_context import AUTH_TENANT_FIELD
from parallax.server import ownership
from parallax.server.caller import ADMIN, Caller, Unauthenticated
from parallax.server.caller import authenticate as authenticate_caller
from parallax.server.refusals import Refused

auth = Auth()

TENANT_PREFIXES = ("playbooks", "prompts", "traces", "dlq", "consumed", "loop")
"""Store namespaces that start with their tenant: [prefix, tenant, ...] (aegra.json `store.scopes`).
"""
ACTIVE = ("pending", "running")


WRITERS = {
    "playbooks": "the learn graph (and release, for labels)",
    "prompts": "the learn graph",
    "traces": "the solve and plan graphs (feedback: the feedback graph)",
    "dlq": "the solve graph",
    "consumed": "the learn and loop graphs",
    "loop": "the loop graph",
}
"""Which graph writes each internal namespace: what a refused store write is told to use instead."""


def user_fields(caller: Caller) -> dict[str, Any]:
    """The user Aegra gets for a caller (a MinimalUserDict plus Parallax's tenant field)."""
    return {
        "identity": caller.identity,
        "display_name": caller.tenant,
        AUTH_TENANT_FIELD: caller.tenant,
        "permissions": [],
        USER_FIELD: caller.user,
        ROLE_FIELD: caller.role,
    }


USER_FIELD, ROLE_FIELD = "parallax_user", "parallax_role"
"""The Aegra user's fields that carry the Caller's user and role (server/store_views.py reads them
too)."""


def caller_of_user(user: Any) -> Caller:
    """The Caller an Aegra user stands for. One Parallax's authentication did not make (Aegra's
    scheduler firing a cron builds one from the cron's tenant) acts for the tenant, as a static key
    does."""

    def field(name: str) -> Any:
        return user.get(name) if isinstance(user, dict) else getattr(user, name, None)

    return Caller(
        tenant=str(field("identity")), user=field(USER_FIELD), role=field(ROLE_FIELD) or ADMIN
    )


@auth.authenticate
async def authenticate(headers: dict[str, Any]) -> dict[str, Any]:
    try:
        return user_fields(authenticate_caller(headers))
    except Unauthenticated as exc:
        raise Auth.exceptions.HTTPException(status_code=401, detail=str(exc)) from None


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, Any]:
    """Threads carry their tenant as `owner` metadata and their user as `parallax_user`; every read
    and search filters on what the caller may see (server/ownership.py)."""
    caller = caller_of_user(ctx.user)
    if ctx.action == "create" and isinstance(value, dict):
        value["metadata"] = {
            **ownership.stamped(value.get("metadata"), caller),
            "owner": caller.tenant,
        }
        return {"metadata": value["metadata"]}
    return ownership.thread_filter(caller)


async def pending_runs(tenant: str | None = None) -> int:
    """Runs pending or running in Aegra's runs table: one tenant's, or everyone's."""
    from aegra_api.core.database import db_manager
    from sqlalchemy import text

    query = "SELECT count(*) FROM runs WHERE status IN ('pending', 'running')"
    async with db_manager.get_engine().connect() as conn:
        if tenant is None:
            count: int = (await conn.execute(text(query))).scalar_one()
        else:
            count = (
                await conn.execute(text(query + " AND user_id = :tenant"), {"tenant": tenant})
            ).scalar_one()
        return count


async def backpressure(caller: Caller) -> Refused | None:
    """The 429 (with Retry-After) while the caller's tenant has PARALLAX_MAX_PENDING runs pending or
    running."""
    settings = settings_mod.load()
    waiting = await pending_runs(caller.tenant)
    if waiting < settings.max_pending:
        return None
    return Refused(
        429,
        f"tenant {caller.tenant!r} has {waiting} runs pending or running (most:"
        f" {settings.max_pending}): retry after {settings.retry_after_s} s",
        headers={"Retry-After": str(settings.retry_after_s)},
    )


NAMESPACE_FIELDS = {"search": "namespace_prefix", "list_namespaces": "prefix"}
"""The field that holds a store request's namespace, by action (put, get, delete: `namespace`)."""


def _namespace(value: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(the field that holds the namespace, the namespace) of a store request."""
    for field in ("namespace", "namespace_prefix", "prefix"):
        if value.get(field):
            return field, [str(part) for part in value[field]]
    return None, []


@auth.on.store
async def own_namespaces(
    ctx: Auth.types.AuthContext, value: dict[str, Any]
) -> dict[str, Any] | None:
    """Tenant namespaces are [prefix, tenant, ...]: a bare [prefix] means the caller's own, one
    naming another tenant is refused (403) instead of quietly coming back empty; writing one is
    refused (403).
    """
    field, namespace = _namespace(value if isinstance(value, dict) else {})
    caller = caller_of_user(ctx.user)
    if not namespace or namespace[0] not in TENANT_PREFIXES:
        if caller.admin:
            return None
        return {
            field or NAMESPACE_FIELDS.get(str(ctx.action), "namespace"): ownership.user_namespace(
                caller, namespace
            )
        }
    assert field is not None
    if ctx.action in ("put", "delete"):
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail=(
                f"namespace {namespace[:3]} is read-only through /store: its records are written "
                f"by {WRITERS[namespace[0]]}, which screens them; run that graph instead"
            ),
        )
    if len(namespace) > 1 and namespace[1] != ctx.user.identity:
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail=(
                f"namespace {namespace[:2]} belongs to another tenant: your key is for "
                f"{ctx.user.identity!r}"
            ),
        )
    if (
        not caller.admin
        and namespace[0] not in ownership.USER_READABLE
        and not (ctx.action == "get" and namespace[0] in ownership.USER_GETS)
    ):
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail=(
                f"namespace [{namespace[0]!r}] holds every user's records: only the tenant's "
                "administrator searches it"
            )
            + (
                " (a user reads one trace by its id)" if namespace[0] in ownership.USER_GETS else ""
            ),
        )
    if len(namespace) == 1:
        return {field: [namespace[0], ctx.user.identity]}
    return None
