"""A request body read at most to its cap (413), and its JSON parsed once, at most so deep (422).

Also refused (422): what no database column keeps, whole numbers outside 64 bits and text holding
NUL. See docs/limits.md#requests-on-the-served-api.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from parallax.server.refusals import Refused

PAYLOAD_KEY = "parallax.payload"
"""Where admission keeps the parsed body in the request's scope, for a face that would parse it
again (/v1)."""
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]


def too_large(cap: int, where: str = "the request body") -> Refused:
    return Refused(
        413,
        f"{where} is over {cap} bytes, this server's cap (PARALLAX_MAX_BODY_BYTES): "
        "send less, or ask the operator to raise the cap",
    )


def declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The Content-Length a request declares (None: none, or not a number)."""
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_capped(headers: list[tuple[bytes, bytes]], receive: Receive, cap: int) -> bytes:
    """The whole body, or Refused(413) as soon as it is known to be over `cap` bytes."""
    declared = declared_length(headers)
    if declared is not None and declared > cap:
        raise too_large(cap)
    chunks: list[bytes] = []
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            raise too_large(cap)
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


INT64 = 2**63 - 1
"""The largest whole number a PostgreSQL bigint (and so any count, offset or limit stored or
queried) holds."""


def depth_of(value: Any, limit: int, where: str = "the request body") -> int:
    """How deep `value` nests (a scalar is 0, `[]` is 1), counted without recursion; stops past
    `limit`. Refused(422) for a whole number outside 64 bits or text (a value or a key) holding NUL.
    """
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                raise Refused(
                    422,
                    f"{where} holds text with the NUL character (\\u0000), which no store keeps: "
                    "remove it",
                )
        elif isinstance(node, int) and not isinstance(node, bool):
            if not -INT64 - 1 <= node <= INT64:
                raise Refused(
                    422,
                    f"{where} holds the whole number {str(node)[:40]}, outside 64 bits: "
                    f"send one from {-INT64 - 1} to {INT64}",
                )
        elif isinstance(node, dict | list):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            if isinstance(node, dict):
                stack.extend((key, level) for key in node)
                stack.extend((child, level + 1) for child in node.values())
            else:
                stack.extend((child, level + 1) for child in node)
    return deepest


def too_deep(limit: int, where: str = "the request body") -> Refused:
    return Refused(
        422,
        f"{where} nests JSON more than {limit} levels deep (PARALLAX_MAX_JSON_DEPTH): flatten it",
    )


def parse(body: bytes | str, depth: int, where: str = "the request body") -> Any:
    """The JSON of `body` (None when empty), or Refused: 400 not JSON, 422 nested deeper than
    `depth`, a whole number outside 64 bits, text holding NUL."""
    if not body:
        return None
    try:
        value = json.loads(body)
    except RecursionError:
        raise too_deep(depth, where) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refused(400, f"{where} is not valid JSON: {exc}") from None
    if depth_of(value, depth, where) > depth:
        raise too_deep(depth, where)
    return value
