"""JWTs from a team's identity provider: a Bearer token checked against a JWKS, read as a `Caller`.

See docs/deploy.md#users-and-jwts and docs/internals/server.md#callers-and-tenants.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from jwt import PyJWK, PyJWKClient, PyJWKSet

from parallax.runtime import settings as settings_mod

ASYMMETRIC = frozenset(
    {
        "RS256",
        "RS384",
        "RS512",
        "PS256",
        "PS384",
        "PS512",
        "ES256",
        "ES256K",
        "ES384",
        "ES512",
        "EdDSA",
    }
)
"""The only signature algorithms a token may use: each needs the signer's private key."""
REFETCH_EVERY_S = 30.0
"""How often an unknown key id may make the JWKS be read again before its lifetime is over."""
MAX_CLAIM_CHARS = 128
"""Longest tenant or user name a token may carry."""
MAX_TOKEN_CHARS = 16_384
"""Longest token read at all."""


class TokenRefused(Exception):
    """A JWT that does not authenticate its caller; the message is the one-line 401 the caller
    reads."""


@dataclass(frozen=True)
class TokenCaller:
    """Who a valid token names."""

    tenant: str
    user: str
    admin: bool


def looks_like_jwt(credential: str) -> bool:
    """Whether a credential has a JWT's form (header.payload.signature; an unsigned one's signature
    is empty), so it is checked as a token, not as a key."""
    parts = credential.split(".")
    return len(parts) == 3 and bool(parts[0]) and bool(parts[1])


class Keys:
    """A JWKS's asymmetric keys by key id, read from a file or a URL, kept `ttl` seconds."""

    def __init__(self, location: str, ttl: float) -> None:
        self.location, self.ttl = location, ttl
        self.client = (
            PyJWKClient(location, cache_jwk_set=True, lifespan=ttl, timeout=5)
            if location.startswith(("https://", "http://"))
            else None
        )
        self._keys: dict[str | None, PyJWK] = {}
        self._read_at = -float("inf")
        self._refetched_at = -float("inf")
        self._lock = threading.Lock()

    def _read(self, refresh: bool) -> dict[str | None, PyJWK]:
        if self.client is not None:
            found = self.client.get_jwk_set(refresh=refresh)
        else:
            found = PyJWKSet.from_dict(json.loads(Path(self.location).read_text()))
        keys = {key.key_id: key for key in found.keys if key.algorithm_name in ASYMMETRIC}
        if not keys:
            raise TokenRefused(
                "the server's JWKS holds no asymmetric signing key: tell its operator"
            )
        return keys

    def get(self, kid: str | None) -> PyJWK:
        """The key `kid` names (None: the JWKS's only key); TokenRefused when there is none."""
        now = time.monotonic()
        with self._lock:
            stale = now - self._read_at > self.ttl
            missing = kid not in self._keys and not (kid is None and len(self._keys) == 1)
            refetch = not stale and missing and now - self._refetched_at > REFETCH_EVERY_S
            if stale or refetch:
                try:
                    self._keys = self._read(refresh=True)
                except (OSError, ValueError, jwt.PyJWTError) as exc:
                    if not self._keys:
                        raise TokenRefused(
                            f"the server cannot read its JWKS ({type(exc).__name__}): tell its"
                            " operator"
                        ) from None
                self._read_at = now
                if refetch:
                    self._refetched_at = now
            keys = self._keys
        if kid is None:
            if len(keys) == 1:
                return next(iter(keys.values()))
            raise TokenRefused(
                "JWT names no key id (kid) and the JWKS holds several keys: sign with a kid"
            )
        if kid not in keys:
            raise TokenRefused(
                f"JWT signed by an unknown key (kid {kid[:64]!r} is not in the server's JWKS)"
            )
        return keys[kid]


_keys: Keys | None = None


def keys_for(location: str, ttl: float) -> Keys:
    """The process's one key cache for the configured JWKS (a new one when the setting changed)."""
    global _keys
    if _keys is None or (_keys.location, _keys.ttl) != (location, ttl):
        _keys = Keys(location, ttl)
    return _keys


def configured() -> bool:
    return bool(settings_mod.load().jwt_jwks)


def _name(claims: dict[str, Any], claim: str, what: str) -> str:
    value = claims.get(claim)
    if not isinstance(value, str) or not value.strip():
        raise TokenRefused(f"JWT lacks the {what} claim {claim!r} (a non-empty string)")
    if len(value) > MAX_CLAIM_CHARS:
        raise TokenRefused(f"JWT's {what} claim {claim!r} is over {MAX_CLAIM_CHARS} characters")
    return value


def _roles(claims: dict[str, Any], claim: str) -> list[str]:
    value = claims.get(claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, str)]
    return []


def verify(token: str) -> TokenCaller:
    """The caller a JWT authenticates; TokenRefused (one line) when it does not."""
    settings = settings_mod.load()
    if not settings.jwt_jwks or not settings.jwt_issuer or not settings.jwt_audience:
        raise TokenRefused(
            "this server accepts no JWTs (PARALLAX_JWT_JWKS, _ISSUER and _AUDIENCE unset): use an"
            " API key"
        )
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenRefused(f"JWT is over {MAX_TOKEN_CHARS} characters")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenRefused("Bearer token is neither an API key nor a well-formed JWT") from None
    alg = header.get("alg")
    if alg not in ASYMMETRIC:
        raise TokenRefused(
            f"JWT algorithm {str(alg)[:16]!r} is refused: tokens are signed with an asymmetric key "
            "of the server's JWKS (RS256, PS256, ES256, EdDSA, ...)"
        )
    kid = header.get("kid")
    key = keys_for(settings.jwt_jwks, settings.jwt_jwks_ttl_s).get(
        kid if isinstance(kid, str) else None
    )
    if key.algorithm_name != alg:
        raise TokenRefused(
            f"JWT algorithm {alg!r} is not the algorithm of its key ({key.algorithm_name})"
        )
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=[alg],
            audience=settings.jwt_audience,
            issuer=settings.jwt_issuer,
            leeway=settings.jwt_leeway_s,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.ExpiredSignatureError:
        raise TokenRefused(
            "JWT expired (exp is past): get a new token from your identity provider"
        ) from None
    except jwt.InvalidAudienceError:
        raise TokenRefused(
            f"JWT has the wrong audience (aud): this server accepts {settings.jwt_audience!r}"
        ) from None
    except jwt.InvalidIssuerError:
        raise TokenRefused(
            f"JWT has the wrong issuer (iss): this server accepts {settings.jwt_issuer!r}"
        ) from None
    except jwt.InvalidSignatureError:
        raise TokenRefused(
            "JWT signature does not verify with the server's key: it was signed by another key"
        ) from None
    except jwt.MissingRequiredClaimError as exc:
        raise TokenRefused(f"JWT lacks the {exc.claim!r} claim") from None
    except jwt.ImmatureSignatureError:
        raise TokenRefused("JWT is not valid yet (nbf or iat is in the future)") from None
    except jwt.PyJWTError as exc:
        raise TokenRefused(f"JWT is invalid: {type(exc).__name__}") from None
    tenant = _name(claims, settings.jwt_tenant_claim, "tenant")
    user = _name(claims, settings.jwt_user_claim, "user")
    return TokenCaller(
        tenant, user, settings.jwt_admin_role in _roles(claims, settings.jwt_role_claim)
    )
