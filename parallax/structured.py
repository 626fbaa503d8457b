"""Schema-constrained model calls that survive small models and flaky endpoints.

Why this exists: a branch needs one validated pydantic object from a model, and three
things get in the way. Transient endpoint errors (429, 5xx, timeouts) are retried with
backoff and jitter, honouring `Retry-After`. Replies that are not valid JSON for the
schema are re-asked at most `max_reasks` times inside the same branch, so a re-ask never
becomes a second vote. Token usage and attempts are counted for the branch trace. An
endpoint that keeps failing trips its circuit breaker (parallax/circuit.py) and further
calls fail fast instead of piling up retries.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import re
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import httpx
import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from parallax import models
from parallax.circuit import CircuitOpen, breaker_for
from parallax import settings as settings_mod
from state.lifecycle import Lifecycle

T = TypeVar("T", bound=BaseModel)

TRANSIENT_ERRORS = (
    openai.RateLimitError,
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.InternalServerError,
    httpx.TransportError,
    asyncio.TimeoutError,
    TimeoutError,
)


class ParseFailure(ValueError):
    """The model never produced JSON matching the schema."""


def extract_json(text: str) -> dict:
    """The first JSON object in a reply: code fences stripped, prose around it ignored."""
    cleaned = re.sub(r"```(?:json)?", "", text or "")
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", cleaned):
        try:
            value, _ = decoder.raw_decode(cleaned, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise ParseFailure(f"no JSON object in reply: {text[:120]!r}")


def parse_reply(text: str, schema: type[T]) -> T:
    try:
        return schema.model_validate(extract_json(text))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "object"
        raise ParseFailure(f"{where}: {first['msg']}") from exc


@functools.lru_cache(maxsize=64)
def response_format(schema: type[BaseModel], kind: str) -> dict | None:
    """The `response_format` an endpoint of this `kind` understands (PARALLAX_RESPONSE_FORMAT)."""
    json_schema = schema.model_json_schema()
    if kind == "json_object_schema":  # llama.cpp server
        return {"type": "json_object", "schema": json_schema}
    if kind == "json_schema":  # OpenAI, vLLM, Ollama
        return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": json_schema}}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


def _retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(header), 60.0) if header else None
    except ValueError:
        return None


def _delay_after(exc: BaseException, failures: int) -> float:
    """Exponential backoff with jitter, or the server's Retry-After when it gives one."""
    after = _retry_after(exc)
    return after if after is not None else min(20.0, 0.5 * 2 ** (failures - 1)) * random.uniform(0.5, 1.5)


def _wait(retry_state) -> float:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    return _delay_after(exc, retry_state.attempt_number + 1)


@dataclass
class CallResult(Generic[T]):
    value: T
    attempts: int = 1
    reasks: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "completion": 0, "total": 0})


def _add_usage(tokens: dict[str, int], message: AIMessage) -> None:
    usage = getattr(message, "usage_metadata", None) or {}
    tokens["prompt"] += usage.get("input_tokens", 0)
    tokens["completion"] += usage.get("output_tokens", 0)
    tokens["total"] += usage.get("total_tokens", 0)


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (asyncio.TimeoutError, TimeoutError, openai.APITimeoutError))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class BranchError(RuntimeError):
    """A branch gave up; carries what it spent so the trace stays honest."""

    def __init__(self, message: str, *, attempts: int, reasks: int, tokens: dict[str, int], timeout: bool):
        super().__init__(message)
        self.attempts, self.reasks, self.tokens, self.timeout = attempts, reasks, tokens, timeout


async def ask(
    messages: list[BaseMessage],
    schema: type[T],
    *,
    model: str,
    temperature: float,
    timeout_s: float,
    max_attempts: int,
    max_reasks: int,
    max_tokens: int,
    lifecycle: Lifecycle | None = None,
) -> CallResult[T]:
    """One branch's model work: call, validate, re-ask on bad JSON, retry on transient errors.

    `lifecycle` (state/lifecycle.py) records each attempt: IN_PROGRESS, then TIMEOUT or
    FAILED and RETRY when another attempt follows. The caller records the end
    (COMPLETED, or ESCALATED from the BranchError)."""
    life = lifecycle or Lifecycle([{"state": "DISPATCHED", "at": 0.0, "reason": ""}])
    llm = await models.chat_model(model=model, timeout_s=timeout_s, max_tokens=max_tokens)
    call_kwargs: dict = {"temperature": temperature}
    kind = settings_mod.load().response_format
    fmt = response_format(schema, kind)
    if fmt is not None:
        call_kwargs["response_format"] = fmt
    if kind == "json_object_schema":  # llama.cpp ignores ChatOpenAI's max_completion_tokens
        call_kwargs["extra_body"] = {"max_tokens": max_tokens}
    tokens = {"prompt": 0, "completion": 0, "total": 0}
    attempts = reasks = 0
    conversation = list(messages)

    breaker = breaker_for(str(getattr(llm, "openai_api_base", None) or type(llm).__name__))

    async def call_once() -> AIMessage:
        nonlocal attempts
        breaker.before_call()
        attempts += 1
        again = f"attempt {attempts}" + (f", re-ask {reasks}" if reasks else "")
        life.move("IN_PROGRESS", again if attempts > 1 else "")
        try:
            async with asyncio.timeout(timeout_s):
                reply = await llm.ainvoke(conversation, **call_kwargs)
        except TRANSIENT_ERRORS as exc:
            breaker.record_failure()
            life.move("TIMEOUT" if _is_timeout(exc) else "FAILED", _describe(exc))
            raise
        except BaseException:
            breaker.probing = False  # not the endpoint's fault: let the next call probe
            raise
        breaker.record_success()
        return reply

    async def call_with_retries() -> AIMessage:
        """First try straight away; the retry machinery only after a transient error."""
        try:
            return await call_once()
        except TRANSIENT_ERRORS as first:
            if max_attempts <= 1:
                raise
            retrying = AsyncRetrying(
                stop=stop_after_attempt(max_attempts - 1),
                wait=_wait,
                retry=retry_if_exception(lambda e: isinstance(e, TRANSIENT_ERRORS)),
                before_sleep=lambda state: life.move("RETRY", f"backoff {state.upcoming_sleep:.2f}s"),
                reraise=True,
            )
            delay = _delay_after(first, 1)
            life.move("RETRY", f"backoff {delay:.2f}s")
            await asyncio.sleep(delay)
            return await retrying(call_once)

    try:
        while True:
            reply = await call_with_retries()
            _add_usage(tokens, reply)
            try:
                value = parse_reply(str(reply.content), schema)
            except ParseFailure as exc:
                life.move("FAILED", f"invalid reply: {exc}")
                if reasks >= max_reasks:
                    raise
                life.move("RETRY", "re-ask for a valid reply")
                reasks += 1
                conversation += [
                    reply,
                    HumanMessage(f"That reply was not valid ({exc}). Answer again with only the JSON object."),
                ]
                continue
            return CallResult(value, attempts, reasks, tokens)
    except (ParseFailure, CircuitOpen, *TRANSIENT_ERRORS, openai.APIError, openai.LengthFinishReasonError) as exc:
        raise BranchError(_describe(exc), attempts=attempts, reasks=reasks, tokens=tokens, timeout=_is_timeout(exc)) from exc
