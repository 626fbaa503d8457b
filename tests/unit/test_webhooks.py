"""Webhooks without a server: the address guard (every resolved address checked), signatures,
backoff, settings, and one delivery attempt against a loopback receiver
(testkit/webhook_receiver.py).

The deployed path (outbox, triggers, replicas, a replica killed mid-delivery) is
tests/integration/test_platform_api.py. Name resolution is scripted here: nothing leaves the
machine.
"""

from __future__ import annotations

import json

import pytest

from parallax.runtime import settings as settings_mod
from parallax.runtime import webhooks
from testkit.webhook_receiver import WebhookReceiver

LOOPBACK = webhooks.parse_networks("127.0.0.0/8")


def resolver(table: dict[str, list[str]]):
    async def resolve(host: str, _port: int) -> list[str]:
        if host not in table:
            raise OSError(f"no such host {host}")
        return table[host]

    return resolve


@pytest.mark.parametrize(
    "address, kind",
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.7", "private"),
        ("172.16.3.4", "private"),
        ("172.31.255.1", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("100.64.0.1", "not public"),  # carrier-grade NAT: shared, not global
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.1.1.1", "private"),  # IPv4 in IPv6 is judged as IPv4
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
    ],
)
def test_addresses_that_are_not_public_are_refused_and_say_what_they_are(address, kind):
    why = webhooks.refusal(address)
    assert (
        why is not None and f"a {kind} address" in why and "PARALLAX_WEBHOOK_ALLOW_NETWORKS" in why
    )


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001::200e"]
)
def test_public_addresses_may_be_reached(address):
    assert webhooks.refusal(address) is None


@pytest.mark.parametrize(
    "address, form, inside",
    [
        ("64:ff9b::7f00:1", "NAT64", "127.0.0.1"),
        ("64:ff9b::a9fe:a9fe", "NAT64", "169.254.169.254"),
        ("64:ff9b::808:808", "NAT64", "8.8.8.8"),
        ("64:ff9b:1::a00:1", "local-use NAT64", "10.0.0.1"),
        ("64:ff9b:1:2::808:808", "local-use NAT64", "8.8.8.8"),
        ("::ffff:127.0.0.1", "IPv4-mapped", "127.0.0.1"),
        ("::ffff:8.8.8.8", "IPv4-mapped", "8.8.8.8"),
        ("::127.0.0.1", "IPv4-compatible", "127.0.0.1"),
        ("::10.0.0.1", "IPv4-compatible", "10.0.0.1"),
        ("::8.8.8.8", "IPv4-compatible", "8.8.8.8"),
        ("2002:7f00:1::1", "6to4", "127.0.0.1"),
        ("2002:808:808::1", "6to4", "8.8.8.8"),
        (
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "Teredo",
            "127.0.0.1",
        ),  # the client's address, inverted, at the end
        ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", "Teredo", "8.8.8.8"),
    ],
)
def test_ipv6_forms_that_carry_an_ipv4_address_are_refused_whatever_is_inside(
    address, form, inside
):
    why = webhooks.refusal(address)
    assert why is not None and form in why and f"with the IPv4 address {inside} inside" in why, why
    assert "PARALLAX_WEBHOOK_ALLOW_NETWORKS" in why and "\n" not in why
    # the operator may allow the form's network (a DNS64 network of its own, say) or the IPv4
    # network inside
    assert (
        webhooks.refusal(address, webhooks.parse_networks("64:ff9b::/32,2001::/32,2002::/16,::/80"))
        is None
    )
    assert webhooks.refusal(address, webhooks.parse_networks(f"{inside}/32")) is None


def test_the_operator_allows_networks_one_by_one():
    allowed = webhooks.parse_networks("127.0.0.0/8, 10.20.0.0/16")
    assert (
        webhooks.refusal("127.0.0.1", allowed) is None
        and webhooks.refusal("::ffff:127.0.0.1", allowed) is None
    )
    assert webhooks.refusal("10.20.3.4", allowed) is None
    assert (
        webhooks.refusal("10.21.3.4", allowed) is not None
        and webhooks.refusal("::1", allowed) is not None
    )
    with pytest.raises(ValueError, match="not a network"):
        webhooks.parse_networks("127.0.0.0/8,localhost")


async def test_every_address_a_host_resolves_to_is_checked():
    table = {
        "hooks.example": ["93.184.216.34"],
        "mixed.example": ["93.184.216.34", "10.0.0.5"],
        "inside.example": ["192.168.0.9"],
        "v6.example": ["2606:4700::1", "::1"],
    }
    target = await webhooks.check_url(
        "https://hooks.example/run-ended?x=1", resolver=resolver(table)
    )
    assert (target.host, target.port, target.address, target.scheme) == (
        "hooks.example",
        443,
        "93.184.216.34",
        "https",
    )
    for url, bad in [
        ("http://mixed.example/h", "10.0.0.5"),
        ("http://inside.example/h", "192.168.0.9"),
        ("http://v6.example:8080/h", "::1"),
    ]:
        with pytest.raises(webhooks.WebhookRefused, match=bad.replace(".", r"\.")):
            await webhooks.check_url(url, resolver=resolver(table))
    # an IP literal is judged as it is, without resolving
    with pytest.raises(webhooks.WebhookRefused, match="link-local"):
        await webhooks.check_url("http://169.254.169.254/latest/meta-data", resolver=resolver({}))
    assert (
        await webhooks.check_url("http://127.0.0.1:9000/h", LOOPBACK, resolver({}))
    ).address == "127.0.0.1"
    with pytest.raises(webhooks.WebhookUnresolved, match="does not resolve"):
        await webhooks.check_url("http://nowhere.example/h", resolver=resolver(table))


@pytest.mark.parametrize(
    "url, says",
    [
        (None, "http or https"),
        ("", "http or https"),
        ("ftp://hooks.example/h", "http or https"),
        ("file:///etc/passwd", "http or https"),
        ("http:///nohost", "with a host"),
        ("http://h.example:99999/", "malformed"),
        ("https://h.example/" + "x" * 3000, "longer than"),
    ],
)
async def test_malformed_urls_are_refused(url, says):
    with pytest.raises(webhooks.WebhookRefused, match=says):
        await webhooks.check_url(url, resolver=resolver({"h.example": ["93.184.216.34"]}))


def test_signature_is_hmac_sha256_of_the_raw_body_and_only_the_right_secret_verifies():
    body = b'{"run_id":"r1","status":"success"}'
    # HMAC-SHA256 of the body with "secret-for-acme-01", computed apart: `openssl dgst -sha256 -hmac
    # secret-for-acme-01`
    expected = "sha256=b3aaf5032fbd7a326f72e6858083301447f38537704cfbd5afbb202ba3fbf181"
    assert webhooks.sign("secret-for-acme-01", body) == expected
    assert webhooks.verify("secret-for-acme-01", body, expected)
    assert not webhooks.verify("secret-for-beta-01", body, expected)
    assert not webhooks.verify("secret-for-acme-01", body + b" ", expected)


def test_backoff_doubles_up_to_the_cap():
    assert [webhooks.backoff_s(n, 2.0, 60.0) for n in range(1, 8)] == [2, 4, 8, 16, 32, 60, 60]
    assert webhooks.backoff_s(10_000, 1.0, 600.0) == 600.0


def test_secrets_are_per_tenant_and_a_bad_entry_is_named(monkeypatch):
    monkeypatch.setenv(
        "PARALLAX_WEBHOOK_SECRETS", "acme:0123456789abcdefXYZ, beta:fedcba9876543210:colon"
    )
    assert settings_mod.load().webhook_tenant_secrets == {
        "acme": "0123456789abcdefXYZ",
        "beta": "fedcba9876543210:colon",
    }
    for bad in ("acme", "acme:short", "a b:0123456789abcdef"):
        monkeypatch.setenv("PARALLAX_WEBHOOK_SECRETS", bad)
        with pytest.raises(settings_mod.SettingsError, match="PARALLAX_WEBHOOK_SECRETS entry 1"):
            _ = settings_mod.load().webhook_tenant_secrets


def test_a_bad_default_strategy_is_refused(monkeypatch):
    monkeypatch.setenv("PARALLAX_MULTITASK_STRATEGY", "queue")
    with pytest.raises(settings_mod.SettingsError, match="PARALLAX_MULTITASK_STRATEGY"):
        settings_mod.load()


def policy(**changes) -> webhooks.DeliveryPolicy:
    fields = {
        "secrets": {"acme": "acme-secret-0123456789"},
        "allowed": tuple(LOOPBACK),
        "timeout_s": 2.0,
        "max_attempts": 3,
        "backoff_s": 1.0,
        "backoff_max_s": 10.0,
        **changes,
    }
    return webhooks.DeliveryPolicy(**fields)


def row(url: str, tenant: str = "acme") -> dict:
    return {
        "id": "w-1",
        "tenant": tenant,
        "url": url,
        "attempts": 1,
        "payload": {
            "run_id": "r-1",
            "thread_id": "t-1",
            "status": "success",
            "values": {"answer": "42"},
        },
    }


async def test_one_attempt_posts_the_signed_run_and_reads_the_answer():
    with WebhookReceiver(answers=[200, 503, 410]) as receiver:
        assert await webhooks.deliver_one(row(receiver.url), policy()) == ("delivered", 200, None)
        assert await webhooks.deliver_one(row(receiver.url), policy()) == ("retry", 503, "HTTP 503")
        assert await webhooks.deliver_one(row(receiver.url), policy()) == (
            "failed",
            410,
            "HTTP 410",
        )  # gone: stop
        got = receiver.wait_for(1)[0]
        assert json.loads(got.body) == {
            "run_id": "r-1",
            "thread_id": "t-1",
            "status": "success",
            "values": {"answer": "42"},
            "webhook_id": "w-1",
        }
        assert webhooks.verify(
            "acme-secret-0123456789", got.body, got.headers["x-parallax-signature"]
        )
        assert got.headers["x-parallax-delivery"] == "w-1" and got.headers["host"].startswith(
            "127.0.0.1:"
        )
    # refused before anything is sent: an address not allowed (for good), a tenant without a secret
    # (for good)
    assert (await webhooks.deliver_one(row("http://127.0.0.1:9/h"), policy(allowed=())))[
        0
    ] == "failed"
    outcome = await webhooks.deliver_one(row("http://127.0.0.1:9/h", tenant="beta"), policy())
    assert outcome[0] == "failed" and "no webhook secret" in str(outcome[2])
    # nobody listening: tried again later
    assert (await webhooks.deliver_one(row("http://127.0.0.1:9/h"), policy()))[0] == "retry"


async def test_the_post_goes_to_the_checked_address_with_the_host_name_kept():
    with WebhookReceiver() as receiver:
        port = receiver.url.split(":")[2].split("/")[0]
        url = f"http://hooks.example:{port}/hook"
        fake = resolver({"hooks.example": ["127.0.0.1"]})
        outcome = await webhooks.deliver_one(row(url), policy(), resolver=fake)
        assert outcome == ("delivered", 200, None)
        assert receiver.wait_for(1)[0].headers["host"] == f"hooks.example:{port}"


async def test_an_attempt_has_one_deadline_however_slowly_the_receiver_drips():
    """httpx's timeout is per read: a byte every 0.1 s under a 1 s timeout never trips it (the
    attempt lasted until the receiver gave up, 64 MB later). One deadline for the whole attempt ends
    it at 1 s, to be tried again.
    """
    with WebhookReceiver(answers=["drip"]) as receiver:
        outcome = await webhooks.deliver_one(row(receiver.url), policy(timeout_s=1.0))
        sent = receiver.wait_for(1)[0].sent
    assert outcome == ("retry", None, "no answer within 1 s (PARALLAX_WEBHOOK_TIMEOUT_S)")
    assert sent < 30  # about ten bytes in the second it had


async def test_at_most_the_response_cap_is_read_then_the_connection_is_closed():
    with WebhookReceiver(answers=["flood"]) as receiver:
        outcome = await webhooks.deliver_one(
            row(receiver.url), policy(max_response_bytes=65_536, timeout_s=20.0)
        )
        receiver.release()
        got = receiver.wait_for(1)[0]
    assert outcome == ("delivered", 200, None)
    assert (
        got.sent < 16 * 1024 * 1024
    )  # of 64 MB: what the socket buffers took before the close, not the body
