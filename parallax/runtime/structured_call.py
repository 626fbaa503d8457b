"""Schema-constrained model calls that survive small models and flaky endpoints.

Retries, re-asks of unparsable replies, the circuit breaker, connection slots and the run's budget,
around one validated reply. See docs/internals/model-calls.md#a-structured-call.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ValidationError

from parallax.runtime import linear_regex
from parallax.runtime.call_attempts import Attempts
from parallax.runtime.call_errors import BranchError as BranchError
from parallax.runtime.call_errors import branch_error
from parallax.runtime.call_setup import (
    CallFormat,
    CallLimits,
    Endpoint,
    call_format,
    open_endpoint,
    trace_config,
)
from parallax.runtime.call_setup import response_format as response_format
from parallax.runtime.call_usage import add_usage as add_usage
from parallax.runtime.call_usage import no_tokens as no_tokens
from parallax.runtime.call_usage import usage_sum
from parallax.runtime.circuit_breaker import CircuitOpen
from parallax.runtime.failure_cause import ParseFailure
from parallax.runtime.guarded_request import guarded
from parallax.runtime.held_request import held
from parallax.runtime.request_budget import BudgetRefused
from parallax.runtime.retry import TRANSIENT_ERRORS, with_retries
from parallax.runtime.services import Services
from parallax.runtime.wave_request import Seat, share_usage
from parallax.state.context import ChatModelFactory
from parallax.state.lifecycle import Lifecycle

T = TypeVar("T", bound=BaseModel)

_DECODER = json.JSONDecoder()
_OBJECT_START = linear_regex.compile(r'\{\s*["}]')
"""Where a JSON object may start: a brace, then a key or the closing brace (a brace of prose is not
tried)."""
MAX_OBJECT_STARTS = 32
"""Starts tried in one reply: each failed try reads up to the end of the reply, so trying every
brace of a reply made of braces took time quadratic in its length (95 ms at 20,000 characters)."""


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in a reply: prose and code fences around it ignored (decoding starts at
    each `{`, so a fence is never stripped from inside the object: a string value may hold ```
    itself)."""
    cleaned = text or ""
    for tried, match in enumerate(_OBJECT_START.finditer(cleaned)):
        if tried == MAX_OBJECT_STARTS:
            break
        try:
            value, _ = _DECODER.raw_decode(cleaned, match.start())
        except (
            json.JSONDecodeError,
            RecursionError,
        ):  # nested deeper than the decoder goes: not an answer either
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


@dataclass
class CallResult(Generic[T]):
    value: T
    attempts: int = 1
    reasks: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: no_tokens())


def _checked(check: Callable[[T], object], value: T) -> None:
    try:
        check(value)
    except ValueError as exc:
        raise ParseFailure(str(exc)) from exc


def _one_usage(reply: AIMessage) -> dict[str, int]:
    return usage_sum([reply])


class StructuredCall:
    """One branch's conversation with its endpoint: each attempt's request (its own, or its
    choice of its wave's one request with `n`), the replies' tokens, and the re-asks that follow
    an invalid reply."""

    def __init__(
        self,
        endpoint: Endpoint,
        call: CallFormat,
        config: RunnableConfig | None,
        limits: CallLimits,
        conversation: list[BaseMessage],
        attempts: Attempts,
        owner: str | None = None,
        seat: Seat | None = None,
    ) -> None:
        self.endpoint, self.call, self.config, self.limits = endpoint, call, config, limits
        self.conversation, self.attempts, self.owner = conversation, attempts, owner
        self.tokens = no_tokens()
        # `n` only on an OpenAI-compatible endpoint (a chat model with a base URL)
        self.seat = seat if seat is not None and endpoint.base_url else None

    def _single(self, choices: int, kwargs: dict[str, Any]) -> Awaitable[AIMessage]:
        return cast(
            Awaitable[AIMessage],
            self.endpoint.llm.ainvoke(self.conversation, self.config, **kwargs),
        )

    def alone(self, starting: bool = True) -> Awaitable[AIMessage]:
        """This attempt's own request (one choice), held against the run's budgets; `starting`:
        it begins an attempt (a seat whose wave's request gave it no choice is already in one)."""
        owners = [self.owner] if self.owner else []
        return guarded(
            self.endpoint,
            self.limits.timeout_s,
            lambda: held(
                self.endpoint, self.call, self.conversation, 1, owners, self._single, _one_usage
            ),
            self.attempts if starting else None,
        )

    async def _choices(self, granted: int, kwargs: dict[str, Any]) -> list[AIMessage]:
        """The conversation asked once for `granted` choices, each choice with its share of the
        usage."""
        config = self.config or {}
        result = await self.endpoint.llm.agenerate(
            [self.conversation],
            callbacks=config.get("callbacks"),
            tags=config.get("tags"),
            metadata=config.get("metadata"),
            run_name=config.get("run_name"),
            **{**({"n": granted} if granted > 1 else {}), **kwargs},
        )
        replies = [
            cast(AIMessage, g.message)
            for g in result.generations[0]
            if isinstance(g, ChatGeneration)
        ]
        fingerprint = (result.llm_output or {}).get("system_fingerprint")
        for reply in (
            replies
        ):  # LangChain leaves the response's own fields off the choices when there are several
            reply.response_metadata.setdefault("system_fingerprint", fingerprint)
        share_usage(
            replies
        )  # each choice its share of the one usage, before the budget settles the sum
        return replies

    async def send_n(self, n: int, owners: list[str]) -> tuple[list[AIMessage], int]:
        """The wave's prompt once, for up to `n` choices (runtime/wave_request.py): (the replies,
        the choices asked; fewer than `n` when the run's budget fits no more)."""
        asked = n

        async def choices(granted: int, kwargs: dict[str, Any]) -> list[AIMessage]:
            nonlocal asked
            asked = granted
            return await self._choices(granted, kwargs)

        replies = await guarded(
            self.endpoint,
            self.limits.timeout_s,
            lambda: held(
                self.endpoint, self.call, self.conversation, n, owners, choices, usage_sum
            ),
            None,
        )
        return replies, asked

    async def call_once(self) -> AIMessage:
        """One attempt's reply: the first takes the seat's choice of its wave's one request, if
        it has a seat."""
        if self.seat is None:
            return await self.alone()
        taking, self.seat = (
            self.seat,
            None,
        )  # the first attempt: this vote's choice of its wave's one request
        self.attempts.start()
        try:
            choice = await taking.take(self.endpoint.wave_key, self.send_n)
        except TRANSIENT_ERRORS as exc:
            self.attempts.failed(exc)
            raise
        if choice is not None:
            return choice
        # the endpoint does not take `n`, or gave this vote no choice: the same attempt, on its own
        try:
            return await self.alone(starting=False)
        except TRANSIENT_ERRORS as exc:
            self.attempts.failed(exc)
            raise

    async def answer(
        self, schema: type[T], check: Callable[[T], object] | None = None
    ) -> CallResult[T]:
        """A valid reply: each call retried on transient errors, an invalid reply re-asked up to
        `max_reasks` times; ParseFailure when the re-asks run out."""
        while True:
            reply = await with_retries(self.call_once, self.limits.max_attempts, self.attempts.life)
            add_usage(self.tokens, reply)
            try:
                value = parse_reply(str(reply.content), schema)
                if check is not None:
                    _checked(check, value)
            except ParseFailure as exc:
                if not self.attempts.reask(exc, self.limits.max_reasks):
                    raise
                self.conversation += [
                    reply,
                    HumanMessage(
                        f"That reply was not valid ({exc}). Answer again with only the JSON object."
                    ),
                ]
                continue
            return CallResult(value, self.attempts.attempts, self.attempts.reasks, self.tokens)


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
    chat_model: ChatModelFactory | None = None,
    metadata: dict[str, Any] | None = None,
    check: Callable[[T], object] | None = None,
    services: Services | None = None,
    seat: Seat | None = None,
    owner: str | None = None,
) -> CallResult[T]:
    """One branch's model work: call, validate, re-ask on bad JSON, retry on transient errors.

    `lifecycle` (state/lifecycle.py) records each attempt: IN_PROGRESS, then TIMEOUT or FAILED and
    RETRY when another attempt follows. The caller records the end (COMPLETED, or ESCALATED from the
    BranchError). `chat_model` replaces the default ChatOpenAI factory (Context.chat_model).
    `metadata` goes with every call to the callbacks, so LangSmith (LANGSMITH_TRACING=true) shows
    which branch made it. `check(value)` may raise ValueError for a reply that parses but cannot be
    used (a plan with a cycle): it is re-asked like bad JSON, with the check's message, inside the
    same branch. `services`: whose circuit breakers count the calls (runtime/services.py; default
    the process's). `seat`: the branch's place in its wave's one request with `n`
    (runtime/wave_request.py): its first attempt takes a choice of that request; re-asks and retries
    ask on their own. Under a budget (runtime/request_budget.py) each request is held at its worst
    case before it is sent, shrunk or not sent (`owner`: the branch whose record will carry its
    spend); a request not sent ends the branch with a BranchError of cause "budget"."""
    limits = CallLimits(model, temperature, timeout_s, max_attempts, max_reasks, max_tokens)
    endpoint = await open_endpoint(limits, chat_model, services)
    current = endpoint.settings
    call = StructuredCall(
        endpoint,
        call_format(schema, current.structured_output, temperature, max_tokens),
        trace_config(metadata, current.langsmith_tracing),
        limits,
        list(messages),
        Attempts(lifecycle or Lifecycle([{"state": "DISPATCHED", "at": 0.0, "reason": ""}])),
        owner,
        seat,
    )
    try:
        return await call.answer(schema, check)
    except (
        BudgetRefused,
        ParseFailure,
        CircuitOpen,
        *TRANSIENT_ERRORS,
        openai.APIError,
        openai.LengthFinishReasonError,
    ) as exc:
        raise branch_error(
            exc,
            attempts=call.attempts.attempts,
            reasks=call.attempts.reasks,
            tokens=call.tokens,
            endpoint=endpoint.name,
            breaker=endpoint.breaker,
        ) from exc
