"""Who is calling: an API key resolved once into a `Caller`, the one answer every face of the served API reads.

An API key (header `x-api-key`, or `Authorization: Bearer <key>`) maps to a tenant through
PARALLAX_API_KEYS="key:tenant,key2:tenant2,..." (several keys may share a tenant). The admission
step of `parallax serve` (server/admission.py) resolves the caller of every request before it
reads the body and keeps the `Caller` in the request's scope; the graph API's authentication
(server/auth.py), /v1, /mcp, the WebSocket, /timeline, the daily budgets and /metrics read that
same object (`caller_of`), or resolve the same way where no admission ran (`langgraph dev`).

A `Caller` is a tenant today; `user` and `role` are where a user below the tenant (and a JWT that
names one) will go, so code that asks "who" asks this object and not a header.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from parallax.runtime import settings as settings_mod

SCOPE_KEY = "parallax.caller"
"""Where admission keeps the resolved Caller in an ASGI scope."""
MISSING_KEY = ("missing or unknown API key: send it as Authorization: Bearer <key> or as x-api-key: <key> "
               "(the key names your tenant)")
"""The 401 message of every face (graph API, /v1, /mcp, /timeline, the WebSocket): both headers work on each."""


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: its tenant, and (not yet issued) a user below it and that user's role."""

    tenant: str
    user: str | None = None
    role: str | None = None

    @property
    def identity(self) -> str:
        """The identity the graph API stores runs, threads and crons under (Aegra's `user_id`): the tenant."""
        return self.tenant


def key_from(headers: Mapping[str, Any]) -> str | None:
    """The API key in `headers` (names lower-cased): x-api-key, else a Bearer token."""
    key = headers.get("x-api-key")
    if key:
        return str(key)
    scheme, _, token = str(headers.get("authorization") or "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


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


def lowered(headers: Any) -> dict[str, str]:
    """Headers as {lower-case name: value}, from an ASGI header list, a Starlette Headers or a dict (bytes or str)."""
    items = headers.items() if hasattr(headers, "items") else headers
    return {(k.decode("latin-1") if isinstance(k, bytes) else str(k)).lower():
            (v.decode("latin-1") if isinstance(v, bytes) else str(v)) for k, v in items}


def resolve(headers: Any) -> Caller | None:
    """The caller the request's headers authenticate, or None (no key, or an unknown one)."""
    tenant = tenant_for_key(key_from(lowered(headers)))
    return None if tenant is None else Caller(tenant=tenant)


def caller_of(scope: MutableMapping[str, Any]) -> Caller | None:
    """The request's caller: the one admission resolved (kept in the scope), else resolved from its headers now."""
    found = scope.get(SCOPE_KEY)
    if isinstance(found, Caller):
        return found
    caller = resolve(scope.get("headers") or [])
    if caller is not None:
        scope[SCOPE_KEY] = caller
    return caller
