"""Webhooks on runs: where they may go, how they are signed, and the outbox that delivers them.

What the deployed API promises (docs/deploy.md, Webhooks): a run created with `webhook` gets one
POST to that URL when it ends, whatever the ending (success, error, interrupted), signed with its
tenant's secret; delivery is retried with backoff and kept in PostgreSQL until it succeeds, so a
replica that dies (even SIGKILL) before or while delivering loses nothing: another replica sends it.

How:
- The URL is checked when the run is created (a malformed or refused URL is a 422) and again at
  every attempt, because DNS answers change. `check_url` resolves the host and checks EVERY
  address it resolves to: one loopback, private, link-local, shared, multicast or otherwise
  non-public address refuses the URL, unless the operator allowed its network
  (PARALLAX_WEBHOOK_ALLOW_NETWORKS, e.g. 127.0.0.0/8). IPv4 addresses wrapped in IPv6 (mapped,
  6to4, Teredo) are judged by the IPv4 inside. The POST then goes to the address that was
  checked (the host name stays in the Host header and in TLS's SNI and certificate check), so
  a second DNS answer cannot redirect it; redirects are not followed.
- The outbox is the table `parallax_webhooks` (runtime/storage/platform_schema.py). A row is
  "armed" when the run is created; a trigger on Aegra's runs table makes it "due", with the run
  as payload, in the same transaction that makes the run terminal, so a run that ended always
  has its webhook due. Replicas claim due rows with `FOR UPDATE SKIP LOCKED` and a lease; a
  replica that dies mid-delivery leaves a lease that runs out, and the row is claimed again.
  Delivery is therefore at least once: a receiver that must act once dedupes on
  `X-Parallax-Delivery` (also `webhook_id` in the body).
- Signature: `X-Parallax-Signature: sha256=<hex HMAC-SHA256 of the raw body with the tenant's
  secret>` (PARALLAX_WEBHOOK_SECRETS). A tenant without a secret cannot ask for webhooks.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]

SIGNATURE_HEADER = "X-Parallax-Signature"
DELIVERY_HEADER = "X-Parallax-Delivery"
METADATA_KEY = "parallax_webhook"
"""The run metadata key that links a run to its armed outbox row (the row's id)."""
CRON_LINK_KEY = "parallax_cron"
"""The config metadata key that links a cron, and each run it creates, to Parallax (server/cron_requests.py)."""
MAX_URL_CHARS = 2048


class WebhookRefused(ValueError):
    """A webhook URL that is malformed or leads to an address webhooks may not reach; the message says why."""


class WebhookUnresolved(WebhookRefused):
    """A webhook host that does not resolve (now): refused at creation, retried at delivery."""


def parse_networks(spec: str | None) -> list[IPNetwork]:
    """The networks of PARALLAX_WEBHOOK_ALLOW_NETWORKS ("127.0.0.0/8,::1/128"); ValueError for a bad entry."""
    networks: list[IPNetwork] = []
    for part in (spec or "").split(","):
        if part.strip():
            try:
                networks.append(ipaddress.ip_network(part.strip(), strict=False))
            except ValueError:
                raise ValueError(f"PARALLAX_WEBHOOK_ALLOW_NETWORKS: {part.strip()!r} is not a network "
                                 "(use CIDR, e.g. 127.0.0.0/8)") from None
    return networks


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped ::ffff:a.b.c.d, 6to4 2002::/16, Teredo), or None."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address.teredo is not None:
            return address.teredo[1]
    return None


def refusal(address: str | IPAddress, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why a webhook may not be sent to `address` (None: it may). Public addresses may; the others
    (loopback, private, link-local, shared, multicast, reserved, unspecified) only inside `allowed`."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    inner = _embedded_ipv4(ip)
    for candidate in (ip, inner):
        if candidate is not None and any(candidate.version == net.version and candidate in net for net in allowed):
            return None
    judged = inner or ip
    if judged.is_global and not judged.is_multicast:
        return None
    kind = ("loopback" if judged.is_loopback else "link-local" if judged.is_link_local
            else "multicast" if judged.is_multicast else "unspecified" if judged.is_unspecified
            else "private" if judged.is_private else "not public")
    return f"{ip} is a {kind} address (allow its network with PARALLAX_WEBHOOK_ALLOW_NETWORKS)"


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (A and AAAA), as getaddrinfo gives them."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))


@dataclass(frozen=True)
class Target:
    """A checked webhook URL: where to connect (`address`) and what to say (`url`, `host`)."""

    url: str
    scheme: str
    host: str
    port: int
    address: str


def split_url(url: Any) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL; WebhookRefused for anything else."""
    if not isinstance(url, str) or not url.strip():
        raise WebhookRefused("webhook must be an http or https URL")
    if len(url) > MAX_URL_CHARS:
        raise WebhookRefused(f"webhook URL is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise WebhookRefused(f"webhook URL is malformed: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefused("webhook must be an http or https URL with a host")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


async def check_url(url: Any, allowed: Sequence[IPNetwork] = (), resolver: Resolver = system_resolver) -> Target:
    """The URL's target once every address its host resolves to may be reached; WebhookRefused otherwise
    (also when the host does not resolve)."""
    scheme, host, port = split_url(url)
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            addresses = await resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise WebhookUnresolved(f"webhook host {host!r} does not resolve: {exc}") from None
    if not addresses:
        raise WebhookUnresolved(f"webhook host {host!r} does not resolve")
    for address in addresses:
        if (why := refusal(address, allowed)) is not None:
            raise WebhookRefused(f"webhook host {host!r} is refused: {why}")
    return Target(url=str(url).strip(), scheme=scheme, host=host, port=port, address=addresses[0])


def sign(secret: str, body: bytes) -> str:
    """The X-Parallax-Signature value of `body`: "sha256=" + hex HMAC-SHA256 with the tenant's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str) -> bool:
    """What a receiver does: recompute the signature of the raw body and compare in constant time."""
    return hmac.compare_digest(sign(secret, body), signature)


def backoff_s(attempts: int, base_s: float, cap_s: float) -> float:
    """Wait after the `attempts`-th failed attempt: base, 2 x base, 4 x base, ... at most `cap_s`."""
    return float(min(cap_s, base_s * 2 ** max(0, min(attempts - 1, 30))))


def body_of(row: dict[str, Any]) -> bytes:
    """The JSON body of a due outbox row: the run as it ended, and the delivery's id."""
    return json.dumps({**(row["payload"] or {}), "webhook_id": row["id"]}, separators=(",", ":"),
                      sort_keys=True, default=str).encode()


async def post(target: Target, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
    """POST `body` to the checked address of `target` (Host and TLS name stay the URL's host); the status code."""
    parts = urlsplit(target.url)
    literal = f"[{target.address}]" if ":" in target.address else target.address
    pinned = urlunsplit((parts.scheme, f"{literal}:{target.port}", parts.path or "/", parts.query, ""))
    host_header = target.host if target.port == (443 if target.scheme == "https" else 80) else f"{target.host}:{target.port}"
    auth: Any = httpx.BasicAuth(parts.username, parts.password or "") if parts.username else httpx.USE_CLIENT_DEFAULT
    async with httpx.AsyncClient(trust_env=False, timeout=timeout_s, follow_redirects=False) as client:
        response = await client.post(pinned, content=body, auth=auth,
                                      headers={**headers, "Host": host_header, "Content-Type": "application/json"},
                                      extensions={"sni_hostname": target.host} if target.scheme == "https" else None)
    return response.status_code


def replica_name() -> str:
    """Who holds a delivery lease: host-pid, like Aegra's workers."""
    return f"{socket.gethostname()}-{os.getpid()}"


# --- the outbox (SQL over an async psycopg connection or pool) ----------------------------------

ARM_SQL = "INSERT INTO parallax_webhooks (id, tenant, url) VALUES (%(id)s, %(tenant)s, %(url)s)"

CLAIM_SQL = """
UPDATE parallax_webhooks w
SET lease_until = now() + make_interval(secs => %(lease_s)s), claimed_by = %(me)s,
    attempts = w.attempts + 1, updated_at = now()
WHERE w.id IN (SELECT id FROM parallax_webhooks
               WHERE status = 'due' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
               ORDER BY next_attempt_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
RETURNING w.id, w.tenant, w.url, w.payload, w.attempts
"""

DONE_SQL = """
UPDATE parallax_webhooks SET status = %(status)s, last_status = %(code)s, last_error = %(error)s,
    delivered_at = CASE WHEN %(status)s = 'delivered' THEN now() END, lease_until = NULL, updated_at = now()
WHERE id = %(id)s AND claimed_by = %(me)s
"""

RETRY_SQL = """
UPDATE parallax_webhooks SET next_attempt_at = now() + make_interval(secs => %(wait_s)s), last_status = %(code)s,
    last_error = %(error)s, lease_until = NULL, updated_at = now()
WHERE id = %(id)s AND claimed_by = %(me)s
"""


@dataclass(frozen=True)
class DeliveryPolicy:
    """The settings one delivery pass needs (from PARALLAX_WEBHOOK_*)."""

    secrets: dict[str, str]
    allowed: tuple[IPNetwork, ...]
    timeout_s: float
    max_attempts: int
    backoff_s: float
    backoff_max_s: float


def policy_from(settings: Any) -> DeliveryPolicy:
    """The DeliveryPolicy of PARALLAX_WEBHOOK_* (SettingsError / ValueError for a bad secret list or network)."""
    return DeliveryPolicy(secrets=settings.webhook_tenant_secrets, allowed=tuple(parse_networks(settings.webhook_allow_networks)),
                          timeout_s=settings.webhook_timeout_s, max_attempts=settings.webhook_max_attempts,
                          backoff_s=settings.webhook_backoff_s, backoff_max_s=settings.webhook_backoff_max_s)


async def deliver_one(row: dict[str, Any], policy: DeliveryPolicy,
                      resolver: Resolver = system_resolver) -> tuple[str, int | None, str | None]:
    """One attempt: ("delivered" | "retry" | "failed", HTTP status or None, error or None)."""
    secret = policy.secrets.get(row["tenant"])
    if secret is None:
        return "failed", None, f"no webhook secret for tenant {row['tenant']!r} (PARALLAX_WEBHOOK_SECRETS)"
    try:
        target = await check_url(row["url"], policy.allowed, resolver)
    except WebhookUnresolved as exc:
        return "retry", None, str(exc)
    except WebhookRefused as exc:
        return "failed", None, str(exc)
    body = body_of(row)
    headers = {SIGNATURE_HEADER: sign(secret, body), DELIVERY_HEADER: row["id"],
               "X-Parallax-Attempt": str(row["attempts"]), "User-Agent": "parallax-webhooks"}
    try:
        code = await post(target, body, headers, policy.timeout_s)
    except httpx.HTTPError as exc:
        return "retry", None, f"{type(exc).__name__}: {exc}"[:500]
    if 200 <= code < 300:
        return "delivered", code, None
    return ("failed" if code == 410 else "retry"), code, f"HTTP {code}"


async def deliver_due(connect: Callable[[], AbstractAsyncContextManager[Any]], policy: DeliveryPolicy, me: str,
                      limit: int = 20, resolver: Resolver = system_resolver) -> list[str]:
    """Claim up to `limit` due webhooks, attempt each once (side by side) and record how it went; the outcomes
    ("delivered", "retry", "failed"), one per claimed webhook. `connect()` gives an autocommit psycopg
    AsyncConnection (a pool's `connection`)."""
    from psycopg.rows import dict_row

    lease_s = policy.timeout_s + 5.0
    async with connect() as conn:
        cursor = conn.cursor(row_factory=dict_row)
        await cursor.execute(CLAIM_SQL, {"lease_s": lease_s, "me": me, "limit": limit})
        rows = await cursor.fetchall()
    if not rows:
        return []
    attempts = await asyncio.gather(*(deliver_one(row, policy, resolver) for row in rows))
    outcomes = []
    async with connect() as conn:
        for row, (outcome, code, error) in zip(rows, attempts, strict=True):
            if outcome == "retry" and row["attempts"] < policy.max_attempts:
                wait_s = backoff_s(row["attempts"], policy.backoff_s, policy.backoff_max_s)
                await conn.execute(RETRY_SQL, {"wait_s": wait_s, "code": code, "error": error, "id": row["id"], "me": me})
            else:
                outcome = "delivered" if outcome == "delivered" else "failed"
                await conn.execute(DONE_SQL, {"status": outcome, "code": code, "error": error, "id": row["id"], "me": me})
            outcomes.append(outcome)
    return outcomes
