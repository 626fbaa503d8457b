"""Store namespaces answered as the caller wrote them; tenancy kept, not shown.

What Aegra 0.11 does: a namespace that no aegra.json `store.scopes` prefix claims is stored
under ["users", <identity>, *namespace] (its per-user isolation, here per tenant), and the
answers carry that stored form: `put_item(["notes"], ...)` then `get_item(["notes"], ...)`
answers namespace ["users", "acme", "notes"], `search_items` the same, and
`list_namespaces(prefix=["notes"])` lists ["users", "acme", "notes", ...], which no client
matches against what it wrote (langgraph-sdk's own store tests fail on it). Without a prefix it
lists only the ["users", tenant] subtree, leaving out the caller's tenant-scoped namespaces
(["playbooks", tenant, ...], ... : server/auth.py), and `max_depth` counted the hidden levels.

What these overrides answer (same routes, matched before Aegra's, each calling Aegra's own
handler for the work and its authorization):
- get: an item that is not there is 200 `null` (langgraph-api's answer, `store.get_item` returns
  None; Aegra answered 404, which the SDK raises as NotFoundError), and so is another user's trace
  for a user below the tenant (a trace names the user whose run wrote it);
- get/search: a namespace ["users", <caller>, *rest] comes back as `rest`; tenant-scoped ones
  ([prefix, tenant, ...]) are already what the caller names (the tenant is part of Parallax's
  namespace names, docs/deploy.md) and come back unchanged;
- list_namespaces: the caller's own namespaces as written: the user-scoped ones stripped of the
  hidden head (max_depth counted on what the caller sees) and, with no prefix or one that starts
  a tenant prefix, the tenant-scoped ones too; sorted, then offset and limit applied to the whole.
Isolation is untouched: storage and lookups are still Aegra's scoping and Parallax's auth
handler (a namespace naming another tenant is 403); only the caller's own subtree is ever read.
Upstream, this is a change to aegra_api/api/store.py (unscope on the way out); until then it
lives here.
"""

from __future__ import annotations

from typing import Annotated, Any

from aegra_api.core.auth_deps import auth_dependency, get_current_user
from aegra_api.models import StoreListNamespacesRequest, StoreSearchRequest, User
from fastapi import APIRouter, Depends, Query

from parallax.server import ownership
from parallax.server.auth import TENANT_PREFIXES, caller_of_user

router = APIRouter(dependencies=auth_dependency)
CurrentUser = Annotated[User, Depends(get_current_user)]
USER_SCOPE = "users"


def as_written(namespace: list[str] | tuple[str, ...], user: Any) -> list[str]:
    """The namespace the caller wrote for the stored one (Aegra's ["users", identity] head removed, and a user's own
    [by_user, user] head below it: server/ownership.py)."""
    parts = list(namespace)
    parts = parts[2:] if parts[:2] == [USER_SCOPE, user.identity] else parts
    return ownership.as_seen(caller_of_user(user), parts)


@router.get("/store/items")  # type: ignore[untyped-decorator]
async def get_item(key: Annotated[str, Query()], user: CurrentUser,
                   namespace: Annotated[str | list[str] | None, Query()] = None) -> Any:
    from aegra_api.api import store
    from fastapi import HTTPException

    try:
        found = await store.get_store_item(key=key, namespace=namespace, user=user)
    except HTTPException as exc:
        if exc.status_code == 404:  # no such item: `null`, as langgraph-api answers (the SDK returns None)
            return None
        raise
    caller = caller_of_user(user)
    if not caller.admin and found.namespace[:1] == ["traces"] and (found.value or {}).get("user") != caller.user:
        return None  # another user's trace: a user reads their own runs' traces only (server/ownership.py)
    found.namespace = as_written(found.namespace, user)
    return found


@router.post("/store/items/search")  # type: ignore[untyped-decorator]
async def search_items(request: StoreSearchRequest, user: CurrentUser) -> Any:
    from aegra_api.api import store

    found = await store.search_store_items(request, user=user)
    for item in found.items:
        item.namespace = as_written(item.namespace, user)
    return found


@router.post("/store/namespaces")  # type: ignore[untyped-decorator]
async def list_namespaces(request: StoreListNamespacesRequest, user: CurrentUser) -> Any:
    from aegra_api.api.store import apply_namespace_scoping
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.database import db_manager
    from aegra_api.models import StoreListNamespacesResponse

    filters = await handle_event(build_auth_context(user, "store", "list_namespaces"), request.model_dump())
    prefix = list((filters or {}).get("prefix") or request.prefix or [])
    suffix = tuple((filters or {}).get("suffix") or request.suffix or ()) or None
    store = db_manager.get_store()
    wanted = request.offset + request.limit

    async def listed(stored_prefix: list[str], hidden: int) -> list[list[str]]:
        depth = request.max_depth + hidden if request.max_depth else None
        found = await store.alist_namespaces(prefix=tuple(stored_prefix), suffix=suffix, max_depth=depth,
                                             limit=wanted, offset=0)
        return [as_written(ns, user) for ns in found]

    namespaces: list[list[str]] = []
    if not prefix or prefix[0] not in TENANT_PREFIXES:  # the caller's user-scoped namespaces
        caller = caller_of_user(user)
        hidden = 2 + len(ownership.user_namespace(caller, [])) if caller.user is not None else 2
        namespaces += await listed(apply_namespace_scoping(prefix, user), hidden)
    if prefix and prefix[0] in TENANT_PREFIXES:  # one tenant-scoped tree ([prefix, tenant] by the auth handler)
        namespaces += await listed(apply_namespace_scoping(prefix, user), 0)
    elif not prefix:  # and every tenant-scoped tree of the caller's ([prefix, tenant]: aegra.json store.scopes)
        for head in TENANT_PREFIXES:
            namespaces += await listed(apply_namespace_scoping([head, user.identity], user), 0)
    unique = sorted({tuple(ns) for ns in namespaces})
    page = unique[request.offset:request.offset + request.limit]
    return StoreListNamespacesResponse(namespaces=[list(ns) for ns in page])
