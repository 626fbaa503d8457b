"""Store items that expire: `ttl` on `PUT /store/items`, `refresh_ttl` on reads, and their sweep.

Aegra drops a put's `ttl` and refreshes on every read. See docs/retention.md#store-items-ttl.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from aegra_api.core.auth_deps import auth_dependency, get_current_user
from aegra_api.models import User
from fastapi import APIRouter, Body, Depends, HTTPException, Response
from pydantic import BaseModel, ConfigDict, Field

from parallax.runtime import settings as settings_mod
from parallax.runtime.ttl_config import MAX_TTL_MIN, StoreTTL, store_ttl
from parallax.server.connections import connection
from parallax.server.thread_ttl import parsed

router = APIRouter(dependencies=auth_dependency)
SWEEP_BATCH = 500
"""Expired items one sweep transaction deletes."""
MAX_SWEEP_BATCHES = 10_000
"""A bound on one sweep's transactions (a sweep always ends; what is left goes at the next)."""

SWEEP = """
DELETE FROM store WHERE (prefix, key) IN (
    SELECT prefix, key FROM store WHERE expires_at IS NOT NULL AND expires_at < now()
    ORDER BY expires_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
"""


@cache
def current() -> StoreTTL:
    """This replica's store TTL: the served aegra.json's `store.ttl` over the settings (checked by
    `parallax serve`)."""
    from aegra_api.config import load_store_config

    block = (load_store_config() or {}).get("ttl")
    return store_ttl(settings_mod.load(), block)


def refresh(asked: bool | None) -> bool:
    """Whether a read restarts the ttl of what it reads: as asked, else the deployment's
    `refresh_on_read`."""
    return current().refresh_on_read if asked is None else asked


class StorePut(BaseModel):
    """LangGraph Platform's StorePutRequest."""

    model_config = ConfigDict(extra="forbid")

    namespace: list[str]
    key: str = Field(min_length=1)
    value: dict[str, Any]
    index: Literal[False] | list[str] | None = None
    ttl: float | None = Field(None, ge=1, le=MAX_TTL_MIN)


@router.put("/store/items", status_code=204)  # type: ignore[untyped-decorator]
async def put_item(
    user: Annotated[User, Depends(get_current_user)], body: Annotated[Any, Body()] = None
) -> Response:
    from aegra_api.api.store import apply_namespace_scoping
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.database import db_manager

    request = parsed(StorePut, body if body is not None else {}, "PUT /store/items")
    if request.ttl is not None and not float(request.ttl).is_integer():
        raise HTTPException(
            422,
            f"PUT /store/items: ttl: {request.ttl} is not a whole number of minutes (the store "
            "keeps whole minutes): round it",
        )
    value = request.model_dump()
    filters = await handle_event(build_auth_context(user, "store", "put"), value)
    namespace, key, item = request.namespace, request.key, request.value
    if filters:  # as Aegra's own put: the auth handler may rewrite the namespace, key or value
        namespace, key, item = (
            filters.get("namespace", namespace),
            filters.get("key", key),
            filters.get("value", item),
        )
    ttl = request.ttl if request.ttl is not None else current().default_ttl
    await db_manager.get_store().aput(
        tuple(apply_namespace_scoping(namespace, user)), key, item, index=request.index, ttl=ttl
    )
    return Response(status_code=204)


async def sweep_expired() -> int:
    """Delete the store items past their expiry, SWEEP_BATCH per transaction (each a statement of
    its own on the replica's autocommit pool, server/connections.py); how many this call deleted."""
    deleted = 0
    for _ in range(MAX_SWEEP_BATCHES):
        async with connection() as conn:
            gone = (await conn.execute(SWEEP, {"batch": SWEEP_BATCH})).rowcount or 0
        deleted += gone
        if gone < SWEEP_BATCH:
            break
    return deleted
