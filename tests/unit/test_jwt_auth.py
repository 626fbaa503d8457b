"""The JWT authenticator (server/jwt_auth.py) and the Caller it resolves into (server/caller.py),
with keys made here.

What a caller notices: a token from their identity provider is their tenant, user and role; anything
else (expired, another audience or issuer, another key, `none` or an HMAC signed with the public
key) is a one-line 401 that says what is wrong and never repeats the token. Static keys resolve as
they always did.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from parallax.server import jwt_auth, ownership
from parallax.server.caller import MISSING_KEY, Caller, Unauthenticated, authenticate, resolve
from parallax.server.refusals import Refused

ISSUER, AUDIENCE = "https://id.example.test/", "parallax-api"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    return {"main": rsa_key(), "other": rsa_key(), "ec": ec.generate_private_key(ec.SECP256R1())}


@pytest.fixture
def jwks(tmp_path: Path, keys: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A JWKS file with the main RSA key (kid k1), an EC key (kid e1) and a symmetric key (kid s1,
    never loaded)."""
    rsa_jwk = {
        **json.loads(RSAAlgorithm.to_jwk(keys["main"].public_key())),
        "kid": "k1",
        "alg": "RS256",
        "use": "sig",
    }
    ec_jwk = {**json.loads(ECAlgorithm.to_jwk(keys["ec"].public_key())), "kid": "e1"}
    oct_jwk = {
        "kty": "oct",
        "kid": "s1",
        "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0",
        "alg": "HS256",
    }
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [rsa_jwk, ec_jwk, oct_jwk]}))
    monkeypatch.setenv("PARALLAX_API_KEYS", "key-acme:acme")
    monkeypatch.setenv("PARALLAX_JWT_JWKS", str(path))
    monkeypatch.setenv("PARALLAX_JWT_ISSUER", ISSUER)
    monkeypatch.setenv("PARALLAX_JWT_AUDIENCE", AUDIENCE)
    monkeypatch.setattr(jwt_auth, "_keys", None)
    return path


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "tenant": "acme",
        "iat": now,
        "exp": now + 300,
    }
    return {k: v for k, v in {**base, **changes}.items() if v is not None}


def token(
    keys: dict[str, Any],
    key: str = "main",
    kid: str | None = "k1",
    alg: str = "RS256",
    **changes: Any,
) -> str:
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(claims(**changes), keys[key], algorithm=alg, headers=headers)


def bearer(value: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {value}".encode())]


def refusal(value: str) -> str:
    with pytest.raises(Unauthenticated) as caught:
        authenticate(bearer(value))
    message = str(caught.value)
    assert "\n" not in message and value not in message  # one line, never the token back
    return message


def test_a_valid_token_is_its_tenant_user_and_role(jwks, keys):
    assert authenticate(bearer(token(keys))) == Caller(tenant="acme", user="alice", role="user")
    admin = authenticate(bearer(token(keys, sub="ada", role=["reader", "admin"])))
    assert admin == Caller(tenant="acme", user="ada", role="admin") and admin.admin
    assert authenticate(bearer(token(keys, "ec", kid="e1", alg="ES256", sub="bob"))).user == "bob"
    # the MCP face calls the graph API back with the caller's credential as x-api-key: a JWT works
    # there too
    assert authenticate([(b"x-api-key", token(keys).encode())]).user == "alice"


def test_static_keys_resolve_as_before_and_are_the_tenants_administrator(jwks):
    caller = authenticate([(b"x-api-key", b"key-acme")])
    assert caller == Caller(tenant="acme") and caller.user is None and caller.admin
    assert resolve(bearer("key-acme")) == Caller(tenant="acme")
    assert refusal("not-a-key") == MISSING_KEY


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"exp": int(time.time()) - 3600}, "JWT expired (exp is past)"),
        ({"aud": "another-api"}, "wrong audience (aud): this server accepts 'parallax-api'"),
        ({"iss": "https://evil.example.test/"}, "wrong issuer (iss)"),
        ({"exp": None}, "lacks the 'exp' claim"),
        ({"aud": None}, "lacks the 'aud' claim"),
        ({"tenant": None}, "lacks the tenant claim 'tenant'"),
        ({"sub": ""}, "lacks the user claim 'sub'"),
        ({"tenant": "x" * 200}, "over 128 characters"),
        ({"nbf": int(time.time()) + 3600}, "not valid yet"),
    ],
)
def test_a_token_with_a_bad_claim_is_a_one_line_401_naming_it(jwks, keys, changes, says):
    assert says in refusal(token(keys, **changes))


def test_a_token_signed_by_another_key_is_refused(jwks, keys):
    assert "signed by another key" in refusal(
        token(keys, "other")
    )  # the server's kid, another key's signature
    assert "unknown key (kid 'k9'" in refusal(token(keys, "other", kid="k9"))


def test_none_and_hmac_confusion_are_refused_before_any_key_is_used(jwks, keys):
    unsigned = jwt.encode(claims(), None, algorithm="none", headers={"kid": "k1"})
    assert "algorithm 'none' is refused" in refusal(unsigned)
    # the classic forgery: an HMAC "signed" with the server's public key as its secret
    public_pem = (
        keys["main"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    import hashlib
    import hmac as hmac_mod

    from jwt.utils import base64url_encode

    head = base64url_encode(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = base64url_encode(json.dumps(claims()).encode())
    signature = base64url_encode(
        hmac_mod.new(public_pem, head + b"." + body, hashlib.sha256).digest()
    )
    assert "algorithm 'HS256' is refused" in refusal(
        (head + b"." + body + b"." + signature).decode()
    )
    # a symmetric key in the JWKS is never loaded, so no HS256 token verifies with it either
    assert "is refused" in refusal(
        jwt.encode(
            claims(),
            b"secret-secret-secret-secret-secret-32",
            algorithm="HS256",
            headers={"kid": "s1"},
        )
    )
    # an asymmetric alg that is not its key's: an RS256 key named by an ES256 token
    assert "not the algorithm of its key (RS256)" in refusal(
        token(keys, "ec", kid="k1", alg="ES256")
    )


def test_without_a_jwks_a_token_is_just_an_unknown_key(monkeypatch, keys):
    monkeypatch.setenv("PARALLAX_API_KEYS", "key-acme:acme")
    monkeypatch.delenv("PARALLAX_JWT_JWKS", raising=False)
    assert refusal(token(keys)) == MISSING_KEY


def test_the_jwks_is_read_again_after_its_lifetime_and_at_once_for_a_new_key_id(
    jwks, keys, monkeypatch
):
    assert authenticate(bearer(token(keys))).user == "alice"
    rotated = json.loads(jwks.read_text())
    rotated["keys"].append(
        {**json.loads(RSAAlgorithm.to_jwk(keys["other"].public_key())), "kid": "k2"}
    )
    jwks.write_text(json.dumps(rotated))
    assert (
        authenticate(bearer(token(keys, "other", kid="k2", sub="carol"))).user == "carol"
    )  # a rotated-in key
    # a stream of made-up key ids reads the JWKS at most once per REFETCH_EVERY_S
    reads = []
    cache = jwt_auth.keys_for(str(jwks), 300.0)
    original = cache._read
    monkeypatch.setattr(cache, "_read", lambda refresh: reads.append(refresh) or original(refresh))
    for n in range(5):
        refusal(token(keys, "other", kid=f"made-up-{n}"))
    assert len(reads) <= 1


def test_what_a_user_may_do_and_see_below_the_tenant():
    alice, ada = Caller("acme", "alice", "user"), Caller("acme", "ada", "admin")
    assert ownership.sees(alice, "acme", "alice") and not ownership.sees(alice, "acme", "bob")
    assert not ownership.sees(alice, "acme", None) and ownership.sees(ada, "acme", "bob")
    assert not ownership.sees(ada, "beta", None)
    assert ownership.thread_filter(alice) == {"owner": "acme", "parallax_user": "alice"}
    assert ownership.thread_filter(Caller("acme")) == {"owner": "acme"}
    assert ownership.stamped({"parallax_user": "bob", "x": 1}, alice) == {
        "x": 1,
        "parallax_user": "alice",
    }
    assert ownership.stamped({"parallax_user": "bob"}, Caller("acme")) == {}
    assert ownership.user_namespace(alice, ["notes"]) == ["by_user", "alice", "notes"]
    assert ownership.as_seen(alice, ["by_user", "alice", "notes"]) == ["notes"]
    assert ownership.user_namespace(ada, ["notes"]) == ["notes"]
    for graph in ("release", "learn", "loop", "stats"):
        with pytest.raises(Refused, match="administrator") as caught:
            ownership.check_graph(alice, graph, {})
        assert caught.value.status == 403
        ownership.check_graph(ada, graph, {})
    ownership.check_graph(alice, "feedback", {"trace_id": "t", "score": "good"})
    with pytest.raises(Refused, match="correcting an answer"):
        ownership.check_graph(alice, "feedback", {"trace_id": "t", "correct": "42"})
    ownership.check_graph(alice, "solve", {"question": "q"})


async def test_a_trace_names_its_user_and_a_users_run_finds_only_their_own(monkeypatch):
    """A feedback run started by bob cannot score alice's trace; the administrator's run finds every
    trace."""
    from langgraph.store.memory import InMemoryStore

    from parallax.runtime import run_context
    from parallax.runtime.storage.namespaces import NotFound
    from parallax.runtime.storage.trace_store import TraceStore

    def as_caller(user: str | None, role: str | None) -> None:
        auth_user = {
            "identity": "acme",
            "parallax_tenant": "acme",
            "parallax_user": user,
            "parallax_role": role,
        }
        monkeypatch.setattr(
            run_context, "_run_configurable", lambda: {"langgraph_auth_user": auth_user}
        )

    traces = TraceStore(InMemoryStore(), "acme")
    as_caller("alice", "user")
    await traces.put_trace(
        {"trace_id": "t-alice-0001", "tenant": "acme", "answer": "4", "status": "ok"}
    )
    assert (await traces.get_trace("t-alice-0001"))["user"] == "alice"
    as_caller("bob", "user")
    with pytest.raises(NotFound):
        await traces.get_trace("t-alice-0001")
    with pytest.raises(NotFound):
        await traces.add_feedback("t-alice-0001", {"score": 0.0, "comment": "", "by": "bob"})
    with pytest.raises(NotFound):
        await traces.get_trace("t-alice")  # nor by the start of its id
    as_caller("ada", "admin")
    assert (await traces.add_feedback("t-alice-0001", {"score": 1.0, "comment": "", "by": "ada"}))[
        1
    ]["feedback"]


def test_a_jwks_url_is_read_with_pyjwkclient_and_kept_for_its_lifetime(keys, monkeypatch):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    served = {"keys": [{**json.loads(RSAAlgorithm.to_jwk(keys["main"].public_key())), "kid": "k1"}]}
    hits = []

    class Jwks(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            hits.append(self.path)
            body = json.dumps(served).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("PARALLAX_JWT_JWKS", f"http://127.0.0.1:{server.server_port}/jwks.json")
        monkeypatch.setenv("PARALLAX_JWT_ISSUER", ISSUER)
        monkeypatch.setenv("PARALLAX_JWT_AUDIENCE", AUDIENCE)
        monkeypatch.setattr(jwt_auth, "_keys", None)
        for _ in range(3):
            assert authenticate(bearer(token(keys))).user == "alice"
        assert hits == ["/jwks.json"]  # read once, then kept (PARALLAX_JWT_JWKS_TTL_S)
        assert "unknown key" in refusal(token(keys, "other", kid="k2"))
        assert len(hits) == 2  # an unknown key id read it again at once
    finally:
        server.shutdown()


async def test_a_user_reads_the_tenants_assistants_and_only_the_administrator_changes_them():
    alice = Caller("acme", "alice", "user")
    for method, path in (
        ("POST", "/assistants"),
        ("PATCH", "/assistants/a1"),
        ("DELETE", "/assistants/a1"),
        ("POST", "/assistants/a1/latest"),
    ):
        with pytest.raises(Refused, match="changing the tenant's assistants") as caught:
            await ownership.check_path(alice, method, path, {})
        assert caught.value.status == 403
        assert await ownership.check_path(Caller("acme"), method, path, {}) is False
    for method, path in (
        ("POST", "/assistants/search"),
        ("POST", "/assistants/count"),
        ("POST", "/assistants/a1/versions"),
        ("GET", "/assistants/a1"),
    ):
        assert await ownership.check_path(alice, method, path, {}) is False
