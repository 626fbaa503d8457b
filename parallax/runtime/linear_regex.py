"""Regular expressions that run in time linear in the text they read: RE2, through google-re2.

See docs/internals/untrusted-input.md#patterns-in-linear-time.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, Protocol, cast

import re2

MAX_PATTERN_CHARS = 1_000
"""Longest pattern a user may give (a schema's `pattern`): longer is refused before it is compiled.
"""
MAX_MEM = 1 << 20
"""Memory one compiled pattern may use, its program and its DFA cache (RE2's default is 8 MiB): a
pattern whose program does not fit is refused, and a search whose DFA outgrows it goes on in RE2's
NFA, slower but still linear. With the 128 patterns google-re2 keeps compiled, at most 128 MiB
however many patterns users send."""


class Match(Protocol):
    def group(self, group: int | str = 0, /) -> str | Any: ...

    def groups(self, default: str | None = None) -> tuple[str | None, ...]: ...

    def start(self, group: int = 0) -> int: ...

    def end(self, group: int = 0) -> int: ...


class Pattern(Protocol):
    @property
    def pattern(self) -> str: ...

    def search(self, text: str) -> Match | None: ...

    def match(self, text: str) -> Match | None: ...

    def fullmatch(self, text: str) -> Match | None: ...

    def finditer(self, text: str) -> Iterator[Match]: ...

    def findall(self, text: str) -> list[str]: ...

    def split(self, text: str) -> list[str]: ...

    def sub(self, repl: str, text: str) -> str: ...


class PatternRefused(ValueError):
    """A pattern RE2 does not run; the message says why, in words a user can act on."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = (
        False  # a refused pattern is reported to its author, not logged to stderr by RE2
    )
    options.max_mem = MAX_MEM
    return options


@functools.lru_cache(maxsize=128)
def compile(pattern: str, *, ignore_case: bool = False, multiline: bool = False) -> Pattern:
    """`pattern` compiled by RE2 (kept for the last 128), or PatternRefused saying why it cannot
    be."""
    flags = ("i" if ignore_case else "") + ("m" if multiline else "")
    source = f"(?{flags}){pattern}" if flags else pattern
    try:
        return cast(Pattern, re2.compile(source, _options()))
    except re2.error as exc:
        raise PatternRefused(_reason(_message(exc))) from None


def refusal(pattern: str) -> str:
    """Why a user's pattern is not run ('' when it is): too long, or a feature RE2 leaves out
    (named)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return (
            f"is {len(pattern):,} characters long, over the {MAX_PATTERN_CHARS:,} this server runs"
        )
    try:
        compile(pattern)
    except PatternRefused as exc:
        return str(exc)
    return ""


def from_ecmascript(pattern: str) -> str:
    """An ECMAScript pattern (JSON Schema's dialect) in RE2's syntax: `\\uXXXX` becomes
    `\\x{XXXX}`."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            escape = pattern[i : i + 6]
            if (
                pattern[i + 1] == "u"
                and len(escape) == 6
                and all(c in "0123456789abcdefABCDEF" for c in escape[2:])
            ):
                out.append("\\x{" + escape[2:] + "}")
                i += 6
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _message(exc: re2.error) -> str:
    raw = exc.args[0] if exc.args else ""
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


_REASONS = (
    ("invalid escape sequence: \\k", "uses a backreference (\\k<name>)"),
    ("invalid perl operator: (?=", "uses a lookahead (?=...)"),
    ("invalid perl operator: (?!", "uses a negative lookahead (?!...)"),
    ("invalid perl operator: (?<=", "uses a lookbehind (?<=...)"),
    ("invalid perl operator: (?<!", "uses a negative lookbehind (?<!...)"),
    ("invalid perl operator: (?>", "uses an atomic group (?>...)"),
    ("invalid perl operator: (?(", "uses a conditional (?(...)...)"),
    ("bad repetition operator: ", "uses a possessive quantifier (such as a++)"),
    ("invalid repetition size", "repeats a part more than 1,000 times"),
    ("pattern too large", "compiles to a program too large to run"),
)


def _reason(message: str) -> str:
    if message.startswith("invalid escape sequence: \\") and message[26:27].isdigit():
        return f"uses a backreference ({message[25:]})"
    for prefix, reason in _REASONS:
        if message.startswith(prefix):
            return reason
    return f"is not a regular expression RE2 reads ({message})"
