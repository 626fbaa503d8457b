"""Secrets and personal data in text replaced by typed placeholders such as `[REDACTED:email]`.

See docs/internals/untrusted-input.md#secrets-and-personal-data.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

_MAX_PASSES = 8  # rules only ever shrink unredacted text, so this is never reached in practice


class _Rule(NamedTuple):
    """One kind of secret: where it is (`pattern`) and, optionally, a check on the match.

    If the pattern has a group named `keep`, that part (e.g. `api_key=` or `Bearer `) stays
    in the output and only the rest is replaced. `check` gets the part to be replaced and
    may reject it (the Luhn check for cards, a digit count for phones).
    """

    kind: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None
    gate: re.Pattern[str] | None = None
    """Something every match contains; text without it skips the (costlier) pattern."""


def placeholder(kind: str) -> str:
    """The text that stands in for a redacted secret of `kind`."""
    return f"[REDACTED:{kind}]"


def luhn_ok(number: str) -> bool:
    """True when the digits in `number` pass the Luhn checksum used by payment cards."""
    digits = [int(c) for c in number if c.isdigit()]
    if not digits:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _is_card(number: str) -> bool:
    return 13 <= sum(c.isdigit() for c in number) <= 19 and luhn_ok(number)


def _is_phone(number: str) -> bool:
    return 9 <= sum(c.isdigit() for c in number) <= 15


# A token starts here: not glued to a preceding letter, digit, '_' or '-'. (Allowing '-' or '_'
# would let a match start at every fragment of "sk-sk-sk-...", which is quadratic.)
_START = r"(?<![A-Za-z0-9_-])"
_END = r"(?![A-Za-z0-9])"

# Key names whose value is a secret in `name=value`, `name: value`, `"name": "value"`.
# An optional prefix allows OPENAI_API_KEY, db.password, aws_secret_access_key, --x-api-key.
# The name starts at a token boundary and its parts alternate (word, separators), so no text
# can be split two ways: matching stays linear.
_SECRET_NAME = (
    r"(?<![A-Za-z0-9_.-])[_.-]*(?:[A-Za-z0-9]+[_.-]+)*"
    r"(?i:api[_-]?key|apikey|access[_-]?key|secret[_-]?(?:access[_-]?)?key|private[_-]?key"
    r"|client[_-]?secret|secret|(?:access|auth|refresh|id|session)[_-]?token|token"
    r"|password|passwd|pwd|passphrase|credentials?)"
)  # nosec B105 # a pattern that finds secrets, not one
_VALUE_END = r"(?![^\s\"',;])"
_PLAIN_NUMBER = r"\d+(?:[.,]\d+)*\.?" + _VALUE_END  # "token = 25" in a word problem stays
_PLACEHOLDER = r"\[REDACTED:[a-z_]+\]" + _VALUE_END
# A quoted value runs to the closing quote; a bare one to whitespace, a quote, ',' or ';'.
_VALUE = r"(?(q)[^\"'\n]+|[^\s\"',;]+)"

_RULES: tuple[_Rule, ...] = (
    # A PEM block; an unterminated one is redacted through its base64 lines. The search for
    # the END line stops at the next BEGIN, so many unterminated blocks are not quadratic.
    _Rule(
        "private_key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:(?:(?!-----BEGIN)[\s\S])*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"|(?:[ \t]*\r?\n[ \t]*[A-Za-z0-9+/=]{16,})*)"
        ),
        gate=re.compile("-----BEGIN"),
    ),
    # header.payload.signature, base64url; the header is JSON, so it starts with eyJ ('{"').
    _Rule(
        "jwt",
        re.compile(_START + r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
        gate=re.compile("eyJ"),
    ),
    # OpenAI (sk-..., sk-proj-...) and Anthropic (sk-ant-...). Real keys are random, so a
    # digit or capital is required: "sk-learn-compatible-estimator" stays.
    _Rule(
        "api_key",
        re.compile(_START + r"sk-(?=[A-Za-z0-9_-]*[0-9A-Z])[A-Za-z0-9_-]{20,}"),
        gate=re.compile("sk-"),
    ),
    _Rule(
        "aws_key",
        re.compile(_START + r"(?:AKIA|ASIA)[A-Z0-9]{16}" + _END),
        gate=re.compile("AKIA|ASIA"),
    ),
    _Rule(
        "api_key", re.compile(_START + r"AIza[A-Za-z0-9_-]{30,}"), gate=re.compile("AIza")
    ),  # Google
    _Rule(
        "token",
        re.compile(_START + r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
        gate=re.compile("gh[pousr]_|github_pat_"),
    ),
    _Rule(
        "token", re.compile(_START + r"xox[abposr]-[A-Za-z0-9-]{10,}"), gate=re.compile("xox")
    ),  # Slack
    _Rule(
        "token",
        re.compile(r"(?P<keep>\b[Bb]earer\s+)(?=[A-Za-z0-9._~+/-]*\d)[A-Za-z0-9._~+/-]{8,}=*"),
        gate=re.compile("[Bb]earer"),
    ),
    _Rule(
        "secret",
        re.compile(
            r"(?P<keep>" + _SECRET_NAME + r"[\"']?\s*[:=]\s*(?P<q>[\"'])?)"
            r"(?!" + _PLACEHOLDER + r")(?!" + _PLAIN_NUMBER + r")" + _VALUE
        ),
        gate=re.compile(r"(?i)key|secret|token|passw|pwd|credential"),
    ),
    _Rule(
        "email",
        re.compile(
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
        ),
        gate=re.compile("@"),
    ),
    _Rule(
        "phone",
        re.compile(
            r"(?<![\w+])(?<!\d )\+\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{2,5}){2,5}(?!\d)"
            r"|(?<![\w(])\(\d{3}\)[ .-]?\d{3}[ .-]\d{4}(?!\d)"
        ),
        _is_phone,
        re.compile(r"[+(]\d"),
    ),
    # 13-19 digits, single spaces or dashes between them, not part of a longer number or a decimal.
    _Rule(
        "card",
        re.compile(r"(?<![\d.])(?<!\d[ -])\d(?:[ -]?\d){12,18}(?![ -]?\d)(?!\.\d)"),
        _is_card,
    ),
)


def _as_text(text: Any) -> str:
    if isinstance(text, str):
        return text
    try:
        return str(text)
    except Exception:  # noqa: BLE001 - a broken __str__ must not break redaction
        return placeholder("unprintable")


def _apply(rule: _Rule, text: str, found: list[str]) -> str:
    """Replace every match of one rule, recording its kind when something was replaced."""

    def replace(m: re.Match[str]) -> str:
        keep = m.group("keep") if "keep" in rule.pattern.groupindex else ""
        secret = m.group(0)[len(keep) :]
        if rule.check is not None and not rule.check(secret):
            return m.group(0)
        found.append(rule.kind)
        return keep + placeholder(rule.kind)

    return rule.pattern.sub(replace, text)


# Every rule's match holds one of these; text without any (most short strings) is left as is
# without running the table. Keep in step with _RULES.
# Digits matter only to the phone rules (a '+' or '(' before them) and to cards (13 digits at
# least): ids, times and counts, which fill a trace, skip the table.
_MAY_HOLD_SECRET = re.compile(
    r"[@:=]|[+(]\d|\d(?:["
    r" -]?\d){12}|sk-|AKIA|ASIA|AIza|gh[pousr]_|github_pat_|xox|[Bb]earer|eyJ|-----BEGIN"
)


def _scrub(text: str) -> tuple[str, list[str]]:
    """Run the rule table until nothing changes; return the text and the kinds replaced."""
    if not _MAY_HOLD_SECRET.search(text):
        return text, []
    found: list[str] = []
    for _ in range(_MAX_PASSES):
        before = text
        for rule in _RULES:
            if rule.gate is None or rule.gate.search(text):
                text = _apply(rule, text, found)
        if text == before:
            break
    return text, list(dict.fromkeys(found))


def redact(text: str) -> str:
    """Return `text` with every secret or piece of personal data replaced by a placeholder.

    Never raises; a non-string argument is converted with `str()` first. Idempotent.
    """
    return _scrub(_as_text(text))[0]


def find_secrets(text: str) -> list[str]:
    """The kinds of secret in `text` (e.g. `["api_key", "email"]`), each once, in the order
    found."""
    return _scrub(_as_text(text))[1]


def redact_value(value: Any) -> Any:
    """Redact every string inside nested dicts, lists and tuples, returning a new structure.

    Dict keys are kept as they are (redacting them could merge entries); other values that
    are not strings are returned unchanged. Named tuples keep their type.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, tuple):
        items = [redact_value(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value
