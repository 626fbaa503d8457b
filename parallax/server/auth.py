"""Who is calling the graph API, what they may see, and how many runs they may queue.

Authentication: an API key (header `x-api-key`, or `Authorization: Bearer <key>`) maps to a
tenant through PARALLAX_API_KEYS="key:tenant,key2:tenant2,..." (several keys may share a
tenant). The user Aegra gets has the tenant as its identity and as `parallax_tenant`, which
is what the graphs read (runtime/run_context.py: `tenant_of`), never the request body.

Keeping tenants apart:
- threads and runs: Aegra keeps them per identity (its `user_id` column); the handlers below
  also stamp `owner` into a thread's metadata and filter on it, so a thread of another tenant
  is 404 whichever way it is asked for;
- store: aegra.json's `store.scopes` puts an API caller's namespaces ["playbooks", ...],
  ["prompts", ...], ["traces", ...], ["dlq", ...], ["consumed", ...] (runs the loop learned from)
  and ["loop", ...] (its rounds) under [prefix, tenant, ...], the very
  namespaces the graphs write (runtime/storage/namespaces.py), so the CLI
  (PARALLAX_DATABASE_URL), the graphs and the API name the same records; anything else lands
  under ["users", tenant, ...]. A bare ["traces"] means ["traces", <your tenant>]; a namespace
  that names another tenant is refused (403).

Backpressure: a run is refused with 429 and `Retry-After` (PARALLAX_RETRY_AFTER_S) while the
tenant already has PARALLAX_MAX_PENDING runs pending or running, counted in Aegra's runs table
across all replicas. The check happens before Aegra stores the run, so a refused run was never
accepted and nothing accepted is dropped. Check and insert are not one transaction: requests
arriving at the same moment on several replicas can pass the limit by a few runs.
"""

from __future__ import annotations

import hmac
from typing import Any

from langgraph_sdk import Auth

from parallax.runtime import settings as settings_mod
from parallax.runtime.run_context import AUTH_TENANT_FIELD

auth = Auth()

TENANT_PREFIXES = ("playbooks", "prompts", "traces", "dlq", "consumed", "loop")
"""Store namespaces that start with their tenant: [prefix, tenant, ...] (aegra.json `store.scopes`)."""
ACTIVE = ("pending", "running")


MISSING_KEY = ("missing or unknown API key: send it as Authorization: Bearer <key> or as x-api-key: <key> "
               "(the key names your tenant)")
"""The 401 message of every face (graph API, /v1, /mcp): both headers work on each."""


def tenant_for_key(key: str | None) -> str | None:
    """The tenant of an API key, or None. Every key is compared in constant time."""
    found = None
    for known, tenant in settings_mod.load().api_key_tenants.items():
        if key is not None and hmac.compare_digest(known.encode(), key.encode()):
            found = tenant
    return found


def key_for_tenant(tenant: str) -> str | None:
    """One API key of `tenant` (None: it has none): what Parallax calls Aegra's endpoints with on its behalf."""
    return next((key for key, owner in settings_mod.load().api_key_tenants.items() if owner == tenant), None)


def key_from(headers: dict[str, Any]) -> str | None:
    key: str | None = headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


@auth.authenticate
async def authenticate(headers: dict[str, Any]) -> dict[str, Any]:  # a MinimalUserDict plus our tenant field
    headers = {(k.decode() if isinstance(k, bytes) else k).lower(): v.decode() if isinstance(v, bytes) else v
               for k, v in headers.items()}
    tenant = tenant_for_key(key_from(headers))
    if tenant is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail=MISSING_KEY)
    return {"identity": tenant, "display_name": tenant, AUTH_TENANT_FIELD: tenant, "permissions": []}


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, Any]:
    """Threads carry their tenant as `owner` metadata; every read and search filters on it."""
    owner = {"owner": ctx.user.identity}
    if ctx.action == "create" and isinstance(value, dict):
        value["metadata"] = {**(value.get("metadata") or {}), **owner}
    return owner


async def pending_runs(tenant: str | None = None) -> int:
    """Runs pending or running in Aegra's runs table: one tenant's, or everyone's."""
    from aegra_api.core.database import db_manager
    from sqlalchemy import text

    query = "SELECT count(*) FROM runs WHERE status IN ('pending', 'running')"
    async with db_manager.get_engine().connect() as conn:
        if tenant is None:
            count: int = (await conn.execute(text(query))).scalar_one()
        else:
            count = (await conn.execute(text(query + " AND user_id = :tenant"), {"tenant": tenant})).scalar_one()
        return count


@auth.on.threads.create_run
async def admit_run(ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate) -> None:
    """429 with Retry-After while the tenant has PARALLAX_MAX_PENDING runs pending or running."""
    settings = settings_mod.load()
    waiting = await pending_runs(ctx.user.identity)
    if waiting >= settings.max_pending:
        raise Auth.exceptions.HTTPException(
            status_code=429, headers={"Retry-After": str(settings.retry_after_s)},
            detail=f"tenant {ctx.user.identity!r} has {waiting} runs pending or running (most: {settings.max_pending}): "
                   f"retry after {settings.retry_after_s} s")


def _namespace(value: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(the field that holds the namespace, the namespace) of a store request."""
    for field in ("namespace", "namespace_prefix", "prefix"):
        if value.get(field):
            return field, [str(part) for part in value[field]]
    return None, []


@auth.on.store
async def own_namespaces(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, Any] | None:
    """Tenant namespaces are [prefix, tenant, ...]: a bare [prefix] means the caller's own, one naming
    another tenant is refused (403) instead of quietly coming back empty."""
    field, namespace = _namespace(value if isinstance(value, dict) else {})
    if field is None or not namespace or namespace[0] not in TENANT_PREFIXES:
        return None
    if len(namespace) == 1:
        return {field: [namespace[0], ctx.user.identity]}
    if namespace[1] != ctx.user.identity:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail=f"namespace {namespace[:2]} belongs to another tenant: your key is for "
                                    f"{ctx.user.identity!r}")
    return None
