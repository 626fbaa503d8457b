"""Store namespaces answered as the caller wrote them; tenancy kept, not shown.

See docs/internals/server.md#agent-protocol-fix-ups.
"""

from __future__ import annotations

from typing import Annotated, Any

from aegra_api.core.auth_deps import auth_dependency, get_current_user
from aegra_api.models import StoreListNamespacesRequest, StoreSearchRequest, User
from fastapi import APIRouter, Depends, Query

from parallax.server import ownership, store_ttl
from parallax.server.auth import TENANT_PREFIXES, caller_of_user

router = APIRouter(dependencies=auth_dependency)
CurrentUser = Annotated[User, Depends(get_current_user)]
USER_SCOPE = "users"


def as_written(namespace: list[str] | tuple[str, ...], user: Any) -> list[str]:
    """The namespace the caller wrote for the stored one (Aegra's ["users", identity] head removed,
    and a user's own [by_user, user] head below it: server/ownership.py)."""
    parts = list(namespace)
    parts = parts[2:] if parts[:2] == [USER_SCOPE, user.identity] else parts
    return ownership.as_seen(caller_of_user(user), parts)


def namespace_list(value: Any) -> list[str]:
    """A namespace of a query string as Aegra reads one: every part split at its dots (a query
    parameter may arrive as `a.b` or as repeated parts), empty parts dropped."""
    parts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [piece for part in parts if isinstance(part, str) for piece in part.split(".") if piece]


@router.get("/store/items")  # type: ignore[untyped-decorator]
async def get_item(
    key: Annotated[str, Query()],
    user: CurrentUser,
    namespace: Annotated[str | list[str] | None, Query()] = None,
    refresh_ttl: Annotated[bool | None, Query()] = None,
) -> Any:
    from aegra_api.api.store import apply_namespace_scoping
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.database import db_manager
    from aegra_api.models import StoreGetResponse

    names = namespace_list(namespace)
    filters = await handle_event(
        build_auth_context(user, "store", "get"), {"key": key, "namespace": names}
    )
    if filters:  # as Aegra's own get: the auth handler may rewrite the namespace or key
        names, key = namespace_list(filters.get("namespace", names)), filters.get("key", key)
    scoped = apply_namespace_scoping(names, user)
    item = await db_manager.get_store().aget(
        tuple(scoped), key, refresh_ttl=store_ttl.refresh(refresh_ttl)
    )
    if item is None:  # no such item: `null`, as langgraph-api answers (the SDK returns None)
        return None
    caller = caller_of_user(user)
    if (
        not caller.admin
        and names[:1] == ["traces"]
        and (item.value or {}).get("user") != caller.user
    ):
        # another user's trace: a user reads their own runs' traces only (server/ownership.py)
        return None
    return StoreGetResponse(key=key, value=item.value, namespace=as_written(scoped, user))


class SearchRequest(StoreSearchRequest):  # type: ignore[misc]
    """Aegra's search request and LangGraph Platform's `refresh_ttl`."""

    refresh_ttl: bool | None = None


@router.post("/store/items/search")  # type: ignore[untyped-decorator]
async def search_items(request: SearchRequest, user: CurrentUser) -> Any:
    from aegra_api.api.store import apply_namespace_scoping
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.database import db_manager
    from aegra_api.models import StoreItem, StoreSearchResponse
    from aegra_api.models.search_limit import effective_search_limit

    filters = await handle_event(
        build_auth_context(user, "store", "search"), request.model_dump(exclude={"refresh_ttl"})
    )
    if filters:  # as Aegra's own search: a namespace the handler names, the rest as filters
        request.namespace_prefix = filters.get("namespace_prefix", request.namespace_prefix)
        if more := {k: v for k, v in filters.items() if k != "namespace_prefix"}:
            request.filter = {**(request.filter or {}), **more}
    limit = request.limit if request.limit is not None else effective_search_limit()
    offset = request.offset or 0
    found = await db_manager.get_store().asearch(
        tuple(apply_namespace_scoping(request.namespace_prefix, user)),
        query=request.query,
        filter=request.filter,
        limit=limit,
        offset=offset,
        refresh_ttl=store_ttl.refresh(request.refresh_ttl),
    )
    items = [
        StoreItem(key=r.key, value=r.value, namespace=as_written(r.namespace, user)) for r in found
    ]
    return StoreSearchResponse(items=items, total=len(items), limit=limit, offset=offset)


@router.post("/store/namespaces")  # type: ignore[untyped-decorator]
async def list_namespaces(request: StoreListNamespacesRequest, user: CurrentUser) -> Any:
    from aegra_api.api.store import apply_namespace_scoping
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.database import db_manager
    from aegra_api.models import StoreListNamespacesResponse

    filters = await handle_event(
        build_auth_context(user, "store", "list_namespaces"), request.model_dump()
    )
    prefix = list((filters or {}).get("prefix") or request.prefix or [])
    suffix = tuple((filters or {}).get("suffix") or request.suffix or ()) or None
    store = db_manager.get_store()
    wanted = request.offset + request.limit

    async def listed(stored_prefix: list[str], hidden: int) -> list[list[str]]:
        depth = request.max_depth + hidden if request.max_depth else None
        found = await store.alist_namespaces(
            prefix=tuple(stored_prefix), suffix=suffix, max_depth=depth, limit=wanted, offset=0
        )
        return [as_written(ns, user) for ns in found]

    namespaces: list[list[str]] = []
    if not prefix or prefix[0] not in TENANT_PREFIXES:  # the caller's user-scoped namespaces
        caller = caller_of_user(user)
        hidden = 2 + len(ownership.user_namespace(caller, [])) if caller.user is not None else 2
        namespaces += await listed(apply_namespace_scoping(prefix, user), hidden)
    if (
        prefix and prefix[0] in TENANT_PREFIXES
    ):  # one tenant-scoped tree ([prefix, tenant] by the auth handler)
        namespaces += await listed(apply_namespace_scoping(prefix, user), 0)
    elif (
        not prefix
    ):  # and every tenant-scoped tree of the caller's ([prefix, tenant]: aegra.json store.scopes)
        for head in TENANT_PREFIXES:
            namespaces += await listed(apply_namespace_scoping([head, user.identity], user), 0)
    unique = sorted({tuple(ns) for ns in namespaces})
    page = unique[request.offset : request.offset + request.limit]
    return StoreListNamespacesResponse(namespaces=[list(ns) for ns in page])
