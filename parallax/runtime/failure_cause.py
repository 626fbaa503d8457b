"""Why a model call failed, as one word a batch can count (`connection`, `parse`, ...)."""

from __future__ import annotations

import asyncio

import httpx
import openai

from parallax.runtime.circuit_breaker import CircuitOpen

CAUSES = (
    "connection",
    "timeout",
    "circuit_open",
    "rate_limit",
    "server_error",
    "client_error",
    "parse",
    "length",
    "input",
    "crash",
)
"""connection: refused, reset or dropped; timeout: no answer within the request timeout;
circuit_open: the call was not made (runtime/circuit_breaker.py); rate_limit: 429; server_error:
5xx; client_error: another 4xx; parse: replies that never matched the schema; length: a reply cut at
the token limit; input: a task the solve graph refuses; crash: an unexpected error in Parallax
itself."""


class ParseFailure(ValueError):
    """The model never produced JSON matching the schema (cause "parse"; raised by
    runtime/structured_call.py)."""


def cause_of(exc: BaseException) -> str:
    """The cause of an exception a model call gave up on (see CAUSES)."""
    if isinstance(exc, CircuitOpen):
        return "circuit_open"
    if isinstance(
        exc, (asyncio.TimeoutError, TimeoutError, openai.APITimeoutError, httpx.TimeoutException)
    ):
        return "timeout"
    if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
        return "connection"
    if isinstance(exc, openai.RateLimitError):
        return "rate_limit"
    if isinstance(exc, openai.APIStatusError):
        return "server_error" if exc.status_code >= 500 else "client_error"
    if isinstance(exc, openai.LengthFinishReasonError):
        return "length"
    if isinstance(exc, ParseFailure):
        return "parse"
    return "crash"
