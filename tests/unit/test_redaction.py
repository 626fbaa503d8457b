"""Secrets and personal data become typed placeholders; ordinary text and numbers do not."""

from __future__ import annotations

from collections import namedtuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parallax.runtime.redaction import find_secrets, luhn_ok, placeholder, redact, redact_value

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)

# (text containing one secret, the secret, the placeholder kind)
SECRETS = [
    (
        "key sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD here",
        "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
        "api_key",
    ),
    (
        "key sk-proj-Ab3dEfGhIjKlMnOpQrStUvWx_yz-0123 here",
        "sk-proj-Ab3dEfGhIjKlMnOpQrStUvWx_yz-0123",
        "api_key",
    ),
    (
        "key sk-ant-api03-AbCdEf0123456789-xyz_ABCDEFGH here",
        "sk-ant-api03-AbCdEf0123456789-xyz_ABCDEFGH",
        "api_key",
    ),
    (
        "use ghp_1234567890abcdefghijklmnopqrstuvwxyz now",
        "ghp_1234567890abcdefghijklmnopqrstuvwxyz",
        "token",
    ),
    (
        "use gho_16C7e42F292c6912E7710c838347Ae178B4a now",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
        "token",
    ),
    (
        "use github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz now",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "token",
    ),
    (
        "slack xoxb-1234567890-0987654321-AbCdEfGhIj ok",
        "xoxb-1234567890-0987654321-AbCdEfGhIj",
        "token",
    ),
    ("slack xoxp-1234567890-abcdefghij ok", "xoxp-1234567890-abcdefghij", "token"),
    ("aws AKIAIOSFODNN7EXAMPLE ok", "AKIAIOSFODNN7EXAMPLE", "aws_key"),
    ("aws ASIAY34FZKBOKMUTVV7A ok", "ASIAY34FZKBOKMUTVV7A", "aws_key"),
    (
        "google AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI ok",
        "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI",
        "api_key",
    ),
    (f"jwt {JWT} ok", JWT, "jwt"),
    (f"before\n{PEM}\nafter", PEM, "private_key"),
    ("write to jane.doe+reports@example.co.uk today", "jane.doe+reports@example.co.uk", "email"),
    ("pay with 4111 1111 1111 1111 please", "4111 1111 1111 1111", "card"),
    ("pay with 5500-0000-0000-0004 please", "5500-0000-0000-0004", "card"),
    ("pay with 378282246310005 please", "378282246310005", "card"),  # 15-digit Amex
    ("call +44 20 7946 0958 today", "+44 20 7946 0958", "phone"),
    ("call (555) 123-4567 today", "(555) 123-4567", "phone"),
]


@pytest.mark.parametrize("text, secret, kind", SECRETS)
def test_each_kind_of_secret_is_replaced_and_the_surrounding_text_kept(text, secret, kind):
    out = redact(text)
    assert secret not in out
    assert out == text.replace(secret, placeholder(kind))
    assert find_secrets(text) == [kind]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("api_key=abc123xyz and more", "api_key=[REDACTED:secret] and more"),
        ("OPENAI_API_KEY=hunter2hunter2", "OPENAI_API_KEY=[REDACTED:secret]"),
        ("password: correct-horse", "password: [REDACTED:secret]"),
        ('{"password": "p@ss w0rd"}', '{"password": "[REDACTED:secret]"}'),
        ("password=[REDACTED:fake", "password=[REDACTED:secret]"),
        ("db.token = 'abc.def.ghi'", "db.token = '[REDACTED:secret]'"),
        (
            "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key=[REDACTED:secret]",
        ),
        ("Authorization: Bearer abc123.def456-ghi789", "Authorization: Bearer [REDACTED:token]"),
    ],
)
def test_assignments_and_bearer_keep_the_name_and_lose_the_value(text, expected):
    assert redact(text) == expected


def test_the_most_specific_kind_wins():
    assert redact(f"Authorization: Bearer {JWT}") == "Authorization: Bearer [REDACTED:jwt]"
    assert (
        redact("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123")
        == "OPENAI_API_KEY=[REDACTED:api_key]"
    )
    assert find_secrets(f"Bearer {JWT} and bob@example.com") == ["jwt", "email"]


def test_an_unterminated_private_key_is_still_redacted():
    text = (
        "key:\n-----BEGIN OPENSSH PRIVATE"
        " KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\nThanks"
    )
    assert redact(text) == "key:\n[REDACTED:private_key]\nThanks"


@pytest.mark.parametrize(
    "text",
    [
        "Tom has 17 sheep and buys 5 more.",
        "The car costs 1,200 dollars; tax is 12.5%.",
        "Use pi = 3.14159265358979 for the area.",
        "In 2024 the meeting was on 2024-05-01 at 10:30.",
        "10 - 3 = 7 and 5 + 12 = 17; 2 + 44 20 7946 0958 is not a phone.",
        "The population grew from 7,900,000,000 to 8,100,000,000.",
        "The id 1234567812345678 ends the list.",  # 16 digits, fails Luhn
        "A token = 25 cents and the tokens: 3 each.",
        "Use sk-learn-compatible-estimators for the model.",
        "Convert all units to metres before adding distances.",
        "A bearer bond pays 5% a year.",
        "Email the answer to the teacher.",
        "ISO week 12 3456 7890 and order 555-1234.",
    ],
)
def test_ordinary_text_and_numbers_are_left_alone(text):
    assert redact(text) == text
    assert find_secrets(text) == []


def test_luhn():
    assert luhn_ok("4111 1111 1111 1111")
    assert luhn_ok("79927398713")
    assert not luhn_ok("4111 1111 1111 1112")
    assert not luhn_ok("")
    assert redact("4111111111111111") == "[REDACTED:card]"
    assert redact("4111111111111112") == "4111111111111112"


def test_card_digits_inside_a_longer_number_are_not_a_card():
    twenty = "41111111111111111111"
    assert redact(twenty) == twenty
    assert redact("0.4111111111111111") == "0.4111111111111111"


def test_redaction_is_idempotent_on_a_mixed_document():
    doc = " ".join(text for text, _, _ in SECRETS) + " password='x' api_key=abc123 " + PEM
    once = redact(doc)
    assert redact(once) == once
    assert find_secrets(once) == []


def test_redact_never_raises_on_odd_input():
    class Broken:
        def __str__(self):
            raise ValueError("no")

    assert redact(None) == "None"  # type: ignore[arg-type]
    assert redact(Broken()) == "[REDACTED:unprintable]"  # type: ignore[arg-type]
    assert redact("") == ""


def test_redact_value_walks_nested_structures_and_returns_a_new_one():
    Pair = namedtuple("Pair", "left right")
    value = {
        "user": "bob@example.com",
        "n": 17,
        "nested": [("ok", "sk-abcdefghijklmnopqrstuvwxyz0123"), {"deep": ["AKIAIOSFODNN7EXAMPLE"]}],
        "pair": Pair("plain", "carol@example.org"),
        "none": None,
        "ratio": 3.14,
    }
    out = redact_value(value)
    assert out == {
        "user": "[REDACTED:email]",
        "n": 17,
        "nested": [("ok", "[REDACTED:api_key]"), {"deep": ["[REDACTED:aws_key]"]}],
        "pair": Pair("plain", "[REDACTED:email]"),
        "none": None,
        "ratio": 3.14,
    }
    assert isinstance(out["pair"], Pair) and isinstance(out["nested"][0], tuple)
    assert value["user"] == "bob@example.com"  # the input is not modified
    assert out is not value and out["nested"] is not value["nested"]


# --- properties ---------------------------------------------------------------------------

# Text that stresses the rules: fragments of every pattern, digits, separators and unicode.
noisy = st.lists(
    st.sampled_from(
        [
            "sk-",
            "ant-",
            "AKIA",
            "AIza",
            "ghp_",
            "xoxb-",
            "eyJ",
            ".",
            "@",
            "a",
            "Z",
            "9",
            "4111",
            " ",
            "-",
            "_",
            "=",
            ": ",
            "\n",
            "+44",
            "(555)",
            "api_key",
            "password",
            "Bearer ",
            "'",
            '"',
            "-----BEGIN PRIVATE KEY-----",
            "-----END PRIVATE KEY-----",
            "[REDACTED:",
            "]",
            "é",
            "\u200b",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=300), noisy))
def test_redact_never_raises_and_is_idempotent(text):
    once = redact(text)
    assert isinstance(once, str)
    assert redact(once) == once
    assert find_secrets(once) == []


ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.,!?", min_size=1, max_size=12)
surrounding = st.lists(words, max_size=8).map(" ".join)
emails = st.builds(
    lambda local, domain, tld: f"{local}@{domain}.{tld}",
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._+-", min_size=1, max_size=20),
    st.lists(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=10),
        min_size=1,
        max_size=3,
    ).map(".".join),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=6),
)
digit = st.sampled_from("0123456789")
keys = st.one_of(
    st.builds(
        lambda p, d, body: p + d + body,
        st.sampled_from(["sk-", "sk-proj-", "sk-ant-api03-"]),
        digit,
        st.text(alphabet=ALNUM + "-_", min_size=20, max_size=60),
    ),
    st.builds(
        lambda p, body: p + body,
        st.sampled_from(["ghp_", "gho_", "ghs_"]),
        st.text(alphabet=ALNUM, min_size=36, max_size=40),
    ),
    st.builds(
        lambda body: "AKIA" + body,
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16),
    ),
    st.builds(lambda body: "AIza" + body, st.text(alphabet=ALNUM + "-_", min_size=35, max_size=35)),
    st.builds(lambda body: "xoxb-" + body, st.text(alphabet=ALNUM + "-", min_size=10, max_size=40)),
)


@settings(max_examples=200, deadline=None)
@given(before=surrounding, secret=st.one_of(emails, keys), after=surrounding)
def test_an_inserted_email_or_key_is_always_removed(before, secret, after):
    text = f"{before} {secret} {after}"
    out = redact(text)
    assert secret not in out
    assert "[REDACTED:" in out
    assert find_secrets(text)
