"""Who is calling: an API key or a JWT resolved once into a `Caller`, which every face reads.

See docs/internals/server.md#callers-and-tenants.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from parallax.runtime import settings as settings_mod

ADMIN, USER = "admin", "user"
"""A Caller's roles."""
SCOPE_KEY = "parallax.caller"
"""Where admission keeps the resolved Caller in an ASGI scope."""
MISSING_KEY = (
    "missing or unknown API key: send it as Authorization: Bearer <key> or as x-api-key: <key> "
    "(the key names your tenant)"
)
"""The 401 message of every face (graph API, /v1, /mcp, /timeline, the WebSocket): both headers work
on each."""


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: its tenant, the user below it (None: a static key, which is no
    user), and its role: ADMIN (a static key, or a JWT whose role claim holds
    PARALLAX_JWT_ADMIN_ROLE) or USER."""

    tenant: str
    user: str | None = None
    role: str = "admin"

    @property
    def admin(self) -> bool:
        """Whether the caller is its tenant's administrator: sees every user's records and alone
        changes the tenant's own (server/ownership.py)."""
        return self.role == ADMIN

    @property
    def identity(self) -> str:
        """The identity the graph API stores runs, threads and crons under (Aegra's `user_id`): the
        tenant."""
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
    """One API key of `tenant` (None: it has none): what Parallax calls Aegra's endpoints with on
    its behalf."""
    return next(
        (key for key, owner in settings_mod.load().api_key_tenants.items() if owner == tenant), None
    )


def lowered(headers: Any) -> dict[str, str]:
    """Headers as {lower-case name: value}, from an ASGI header list, a Starlette Headers or a dict
    (bytes or str)."""
    items = headers.items() if hasattr(headers, "items") else headers
    return {
        (k.decode("latin-1") if isinstance(k, bytes) else str(k)).lower(): (
            v.decode("latin-1") if isinstance(v, bytes) else str(v)
        )
        for k, v in items
    }


class Unauthenticated(Exception):
    """No caller: the message is the one-line 401 (MISSING_KEY, or what is wrong with a JWT)."""


def authenticate(headers: Any) -> Caller:
    """The caller the request's headers authenticate: a static key's tenant (its administrator),
    else a JWT's user (server/jwt_auth.py); Unauthenticated with the 401's message otherwise."""
    credential = key_from(lowered(headers))
    tenant = tenant_for_key(credential)
    if tenant is not None:
        return Caller(tenant=tenant)
    if credential is None or not settings_mod.load().jwt_jwks:
        raise Unauthenticated(MISSING_KEY)
    from parallax.server import jwt_auth  # PyJWT: the server extra's

    if not jwt_auth.looks_like_jwt(credential):
        raise Unauthenticated(MISSING_KEY)
    try:
        token = jwt_auth.verify(credential)
    except jwt_auth.TokenRefused as exc:
        raise Unauthenticated(str(exc)) from None
    return Caller(tenant=token.tenant, user=token.user, role=ADMIN if token.admin else USER)


def resolve(headers: Any) -> Caller | None:
    """The caller the request's headers authenticate, or None (no key, an unknown one, or a refused
    JWT)."""
    try:
        return authenticate(headers)
    except Unauthenticated:
        return None


def caller_of(scope: MutableMapping[str, Any]) -> Caller | None:
    """The request's caller: the one admission resolved (kept in the scope), else resolved from its
    headers now."""
    found = scope.get(SCOPE_KEY)
    if isinstance(found, Caller):
        return found
    caller = resolve(scope.get("headers") or [])
    if caller is not None:
        scope[SCOPE_KEY] = caller
    return caller
