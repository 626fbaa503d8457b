"""Webhooks on runs: where they may go, how they are signed, and the outbox that delivers them.

See docs/deploy.md#double-texting-webhooks-retention and docs/internals/postgres.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

log = logging.getLogger("parallax.webhooks")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]

SIGNATURE_HEADER = "X-Parallax-Signature"
DELIVERY_HEADER = "X-Parallax-Delivery"
METADATA_KEY = "parallax_webhook"
"""The run metadata key that links a run to its armed outbox row (the row's id)."""
CRON_LINK_KEY = "parallax_cron"
"""The config metadata key that links a cron, and each run it creates, to Parallax
(server/cron_requests.py)."""
MAX_URL_CHARS = 2048


class WebhookRefused(ValueError):
    """A webhook URL that is malformed or leads to an address webhooks may not reach; the message
    says why."""


class WebhookUnresolved(WebhookRefused):
    """A webhook host that does not resolve (now): refused at creation, retried at delivery."""


def parse_networks(spec: str | None) -> list[IPNetwork]:
    """The networks of PARALLAX_WEBHOOK_ALLOW_NETWORKS ("127.0.0.0/8,::1/128"); ValueError for a bad
    entry."""
    networks: list[IPNetwork] = []
    for part in (spec or "").split(","):
        if part.strip():
            try:
                networks.append(ipaddress.ip_network(part.strip(), strict=False))
            except ValueError:
                raise ValueError(
                    f"PARALLAX_WEBHOOK_ALLOW_NETWORKS: {part.strip()!r} is not a network "
                    "(use CIDR, e.g. 127.0.0.0/8)"
                ) from None
    return networks


NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
"""NAT64's well-known prefix (RFC 6052): the IPv4 address is the last 32 bits."""
NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
"""NAT64's local-use prefix (RFC 8215): a network's own translator, the IPv4 address placed as its
prefix says."""


def _embedded_ipv4(address: IPAddress) -> tuple[str, ipaddress.IPv4Address] | None:
    """(the form, the IPv4 address) of an IPv6 address that carries one, or None."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    if address.ipv4_mapped is not None:
        return "IPv4-mapped", address.ipv4_mapped
    if address in NAT64:
        return "NAT64", low32
    if address in NAT64_LOCAL:
        return "local-use NAT64", low32
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    if address.teredo is not None:
        return "Teredo", address.teredo[1]
    if int(address) >> 32 == 0 and int(address) > 1:  # ::a.b.c.d, not :: or ::1
        return "IPv4-compatible", low32
    return None


def _kind(ip: IPAddress) -> str:
    return (
        "loopback"
        if ip.is_loopback
        else (
            "link-local"
            if ip.is_link_local
            else (
                "multicast"
                if ip.is_multicast
                else (
                    "unspecified"
                    if ip.is_unspecified
                    else "private"
                    if ip.is_private
                    else "not public"
                )
            )
        )
    )


def refusal(address: str | IPAddress, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why a webhook may not be sent to `address` (None: it may). Public addresses may; the others
    (loopback, private, link-local, shared, multicast, reserved, unspecified) and IPv6 forms that
    carry an IPv4 address only inside `allowed` (the IPv6 address's network or the carried IPv4
    one's)."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    embedded = _embedded_ipv4(ip)
    inner = embedded[1] if embedded else None
    for candidate in (ip, inner):
        if candidate is not None and any(
            candidate.version == net.version and candidate in net for net in allowed
        ):
            return None
    allow = "allow its network with PARALLAX_WEBHOOK_ALLOW_NETWORKS"
    if embedded is not None:
        form, carried = embedded
        if not carried.is_global or carried.is_multicast:
            return (
                f"{ip} is a {_kind(carried)} address ({form}, with the IPv4 address {carried}"
                f" inside; {allow})"
            )
        return (
            f"{ip} is a {form} address (with the IPv4 address {carried} inside), which a gateway"
            " may deliver where no check of the IPv6 address looks: give the IPv4 address or a"
            f" native IPv6 one, or {allow}"
        )
    if ip.is_global and not ip.is_multicast:
        return None
    return f"{ip} is a {_kind(ip)} address ({allow})"


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


async def check_url(
    url: Any, allowed: Sequence[IPNetwork] = (), resolver: Resolver = system_resolver
) -> Target:
    """The URL's target once every address its host resolves to may be reached; WebhookRefused
    otherwise (also when the host does not resolve)."""
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
    """The X-Parallax-Signature value of `body`: "sha256=" + hex HMAC-SHA256 with the tenant's
    secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str) -> bool:
    """What a receiver does: recompute the signature of the raw body and compare in constant
    time."""
    return hmac.compare_digest(sign(secret, body), signature)


def backoff_s(attempts: int, base_s: float, cap_s: float) -> float:
    """Wait after the `attempts`-th failed attempt: base, 2 x base, 4 x base, ... at most
    `cap_s`."""
    return float(min(cap_s, base_s * 2 ** max(0, min(attempts - 1, 30))))


def body_of(row: dict[str, Any]) -> bytes:
    """The JSON body of a due outbox row: the run as it ended, and the delivery's id."""
    return json.dumps(
        {**(row["payload"] or {}), "webhook_id": row["id"]},
        separators=(",", ":"),
        sort_keys=True,
        default=str,
    ).encode()


async def post(
    target: Target,
    body: bytes,
    headers: dict[str, str],
    timeout_s: float,
    max_response_bytes: int = 65_536,
) -> int:
    """POST `body` to the checked address of `target` (Host and TLS name stay the URL's host); the
    status code. At most `max_response_bytes` of the answer's body are read, then the connection is
    closed. `timeout_s` bounds each step here; the caller bounds the whole attempt."""
    parts = urlsplit(target.url)
    literal = f"[{target.address}]" if ":" in target.address else target.address
    pinned = urlunsplit(
        (parts.scheme, f"{literal}:{target.port}", parts.path or "/", parts.query, "")
    )
    host_header = (
        target.host
        if target.port == (443 if target.scheme == "https" else 80)
        else f"{target.host}:{target.port}"
    )
    auth: Any = (
        httpx.BasicAuth(parts.username, parts.password or "")
        if parts.username
        else httpx.USE_CLIENT_DEFAULT
    )
    async with httpx.AsyncClient(
        trust_env=False, timeout=timeout_s, follow_redirects=False
    ) as client:
        async with client.stream(
            "POST",
            pinned,
            content=body,
            auth=auth,
            headers={**headers, "Host": host_header, "Content-Type": "application/json"},
            extensions={"sni_hostname": target.host} if target.scheme == "https" else None,
        ) as response:
            read = 0
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read >= max_response_bytes:
                    # enough: only the status counts, and the connection closes with the client
                    break
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
               WHERE status = 'due' AND next_attempt_at <= now()
                 AND (lease_until IS NULL OR lease_until < now())
               ORDER BY next_attempt_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
RETURNING w.id, w.tenant, w.url, w.payload, w.attempts
"""

DONE_SQL = """
UPDATE parallax_webhooks SET status = %(status)s, last_status = %(code)s, last_error = %(error)s,
    delivered_at = CASE WHEN %(status)s = 'delivered' THEN now() END, lease_until = NULL,
    updated_at = now()
WHERE id = %(id)s AND claimed_by = %(me)s
"""

RETRY_SQL = """
UPDATE parallax_webhooks SET next_attempt_at = now() + make_interval(secs => %(wait_s)s),
    last_status = %(code)s, last_error = %(error)s, lease_until = NULL, updated_at = now()
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
    max_response_bytes: int = 65_536
    max_in_flight: int = 20


def policy_from(settings: Any) -> DeliveryPolicy:
    """The DeliveryPolicy of PARALLAX_WEBHOOK_* (SettingsError / ValueError for a bad secret list or
    network)."""
    return DeliveryPolicy(
        secrets=settings.webhook_tenant_secrets,
        allowed=tuple(parse_networks(settings.webhook_allow_networks)),
        timeout_s=settings.webhook_timeout_s,
        max_attempts=settings.webhook_max_attempts,
        backoff_s=settings.webhook_backoff_s,
        backoff_max_s=settings.webhook_backoff_max_s,
        max_response_bytes=settings.webhook_max_response_bytes,
        max_in_flight=settings.webhook_max_in_flight,
    )


async def deliver_one(
    row: dict[str, Any], policy: DeliveryPolicy, resolver: Resolver = system_resolver
) -> tuple[str, int | None, str | None]:
    """One attempt, bounded as a whole by `policy.timeout_s`: ("delivered" | "retry" | "failed",
    HTTP status or None, error or None)."""
    try:
        async with asyncio.timeout(policy.timeout_s):
            return await _attempt(row, policy, resolver)
    except TimeoutError:
        return (
            "retry",
            None,
            f"no answer within {policy.timeout_s:g} s (PARALLAX_WEBHOOK_TIMEOUT_S)",
        )


async def _attempt(
    row: dict[str, Any], policy: DeliveryPolicy, resolver: Resolver
) -> tuple[str, int | None, str | None]:
    secret = policy.secrets.get(row["tenant"])
    if secret is None:
        return (
            "failed",
            None,
            f"no webhook secret for tenant {row['tenant']!r} (PARALLAX_WEBHOOK_SECRETS)",
        )
    try:
        target = await check_url(row["url"], policy.allowed, resolver)
    except WebhookUnresolved as exc:
        return "retry", None, str(exc)
    except WebhookRefused as exc:
        return "failed", None, str(exc)
    body = body_of(row)
    headers = {
        SIGNATURE_HEADER: sign(secret, body),
        DELIVERY_HEADER: row["id"],
        "X-Parallax-Attempt": str(row["attempts"]),
        "User-Agent": "parallax-webhooks",
    }
    try:
        code = await post(target, body, headers, policy.timeout_s, policy.max_response_bytes)
    except httpx.HTTPError as exc:
        return "retry", None, f"{type(exc).__name__}: {exc}"[:500]
    if 200 <= code < 300:
        return "delivered", code, None
    return ("failed" if code == 410 else "retry"), code, f"HTTP {code}"


async def record(
    connect: Callable[[], AbstractAsyncContextManager[Any]],
    row: dict[str, Any],
    policy: DeliveryPolicy,
    me: str,
    attempt: tuple[str, int | None, str | None],
) -> str:
    """Store how one attempt went (retry later with backoff, or delivered / failed for good); the
    outcome."""
    outcome, code, error = attempt
    async with connect() as conn:
        if outcome == "retry" and row["attempts"] < policy.max_attempts:
            wait_s = backoff_s(row["attempts"], policy.backoff_s, policy.backoff_max_s)
            await conn.execute(
                RETRY_SQL,
                {"wait_s": wait_s, "code": code, "error": error, "id": row["id"], "me": me},
            )
            return "retry"
        outcome = "delivered" if outcome == "delivered" else "failed"
        await conn.execute(
            DONE_SQL, {"status": outcome, "code": code, "error": error, "id": row["id"], "me": me}
        )
    return outcome


class Deliveries:
    """A replica's webhook attempts in flight, each its own task (docs/internals/postgres.md).

    `round()` claims as many due webhooks as there is room for and starts them; it does not wait for
    them. `connect()` gives an autocommit psycopg AsyncConnection (a pool's `connection`), held for
    one statement at a time; `on_outcome` hears each attempt's outcome ("delivered", "retry",
    "failed") as it is recorded.
    """

    def __init__(
        self,
        connect: Callable[[], AbstractAsyncContextManager[Any]],
        me: str,
        on_outcome: Callable[[str], None] = lambda _outcome: None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.connect, self.me, self.on_outcome, self.resolver = connect, me, on_outcome, resolver
        self.in_flight: set[asyncio.Task[str]] = set()

    async def round(self, policy: DeliveryPolicy) -> int:
        """Claim and start up to the free room of due webhooks; how many were started."""
        from psycopg.rows import dict_row

        room = policy.max_in_flight - len(self.in_flight)
        if room <= 0:
            return 0
        async with self.connect() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(
                CLAIM_SQL, {"lease_s": policy.timeout_s + 5.0, "me": self.me, "limit": room}
            )
            rows = await cursor.fetchall()
        for row in rows:
            task = asyncio.create_task(
                self._deliver(row, policy), name=f"parallax-webhook-{row['id']}"
            )
            self.in_flight.add(task)
            task.add_done_callback(self.in_flight.discard)
        return len(rows)

    async def _deliver(self, row: dict[str, Any], policy: DeliveryPolicy) -> str:
        attempt = await deliver_one(row, policy, self.resolver)
        try:
            outcome = await record(self.connect, row, policy, self.me, attempt)
        except Exception as exc:  # noqa: BLE001 - the database is away: the lease runs out and the row is claimed again
            log.warning(
                "webhook %s: attempt %s, but its outcome could not be stored (%s: %s); it will be"
                " tried again",
                row["id"],
                attempt[0],
                type(exc).__name__,
                exc,
            )
            return "unrecorded"
        self.on_outcome(outcome)
        return outcome

    async def close(self) -> None:
        """Stop the attempts in flight (their leases run out, and a replica claims them again)."""
        for task in self.in_flight:
            task.cancel()
        await asyncio.gather(*self.in_flight, return_exceptions=True)
