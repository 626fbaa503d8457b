"""Schema-constrained model calls that survive small models and flaky endpoints.

Retries, re-asks of unparsable replies, the circuit breaker, connection slots and the run's budget,
around one validated reply. See docs/internals/model-calls.md#a-structured-call.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ValidationError

from parallax.runtime import chat_models, linear_regex
from parallax.runtime import settings as settings_mod
from parallax.runtime.circuit_breaker import CircuitOpen, clock_time
from parallax.runtime.endpoint_limits import endpoint_slot
from parallax.runtime.endpoint_seen import prompt_key
from parallax.runtime.failure_cause import ParseFailure, cause_of
from parallax.runtime.lease_check import check_lease
from parallax.runtime.prices import price_of, price_table
from parallax.runtime.request_budget import (
    BudgetRefused,
    Worst,
    budgeted,
    held_purses,
    hold_text,
    keep_worst,
    reserve,
    settle,
)
from parallax.runtime.retry import TRANSIENT_ERRORS, is_timeout, with_retries
from parallax.runtime.services import Services, process_services
from parallax.runtime.wave_request import Seat, share_usage
from parallax.state.context import ChatModelFactory
from parallax.state.lifecycle import Lifecycle

T = TypeVar("T", bound=BaseModel)
_R = TypeVar("_R")


_DECODER = json.JSONDecoder()
_OBJECT_START = linear_regex.compile(r'\{\s*["}]')
"""Where a JSON object may start: a brace, then a key or the closing brace (a brace of prose is not tried)."""
MAX_OBJECT_STARTS = 32
"""Starts tried in one reply: each failed try reads up to the end of the reply, so trying every brace of a reply
made of braces took time quadratic in its length (95 ms at 20,000 characters)."""


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in a reply: prose and code fences around it ignored (decoding starts at each `{`, so a
    fence is never stripped from inside the object: a string value may hold ``` itself)."""
    cleaned = text or ""
    for tried, match in enumerate(_OBJECT_START.finditer(cleaned)):
        if tried == MAX_OBJECT_STARTS:
            break
        try:
            value, _ = _DECODER.raw_decode(cleaned, match.start())
        except (json.JSONDecodeError, RecursionError):  # nested deeper than the decoder goes: not an answer either
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
def response_format(schema: type[BaseModel], kind: str) -> dict[str, Any] | None:
    """The `response_format` an endpoint of this `kind` understands (PARALLAX_RESPONSE_FORMAT)."""
    json_schema = schema.model_json_schema()
    if kind == "json_object_schema":  # llama.cpp server
        return {"type": "json_object", "schema": json_schema}
    if kind == "json_schema":  # OpenAI, vLLM, Ollama
        return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": json_schema}}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


@dataclass
class CallResult(Generic[T]):
    value: T
    attempts: int = 1
    reasks: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: no_tokens())


def no_tokens() -> dict[str, int]:
    """A branch's token counts before its first call; `cached_tokens` are the prompt tokens the endpoint
    read from its prefix cache (`usage.prompt_tokens_details.cached_tokens`), part of `prompt`."""
    return {"prompt": 0, "completion": 0, "total": 0, "cached_tokens": 0}


def usage_sum(replies: list[AIMessage]) -> dict[str, int]:
    """The summed `usage_metadata` of a request's replies (each choice carries its share: runtime/wave_request.py)."""
    total = no_tokens()
    for reply in replies:
        add_usage(total, reply)
    return total


def length_usage(exc: openai.LengthFinishReasonError) -> dict[str, int]:
    """What a reply cut at the token limit cost: openai's error carries the completion and its usage."""
    usage = getattr(exc.completion, "usage", None)
    prompt, completion = getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0
    details = getattr(usage, "prompt_tokens_details", None)
    return {"prompt": prompt, "completion": completion, "total": getattr(usage, "total_tokens", 0) or prompt + completion,
            "cached_tokens": getattr(details, "cached_tokens", 0) or 0}


def add_usage(tokens: dict[str, int], message: AIMessage) -> None:
    """Add a model reply's `usage_metadata` to `tokens` (the shape of `no_tokens`)."""
    usage = getattr(message, "usage_metadata", None) or {}
    tokens["prompt"] += usage.get("input_tokens", 0)
    tokens["completion"] += usage.get("output_tokens", 0)
    tokens["total"] += usage.get("total_tokens", 0)
    tokens["cached_tokens"] += (usage.get("input_token_details") or {}).get("cache_read") or 0


def _describe(exc: BaseException) -> str:
    """One line for a branch's error. openai's length error would print the whole usage object;
    what a reader needs is that the reply ran out of tokens, after how many, and which knob sets it."""
    if isinstance(exc, openai.LengthFinishReasonError):
        usage = getattr(exc.completion, "usage", None)
        spent = f" after {usage.completion_tokens} tokens" if usage and usage.completion_tokens else ""
        return (f"LengthFinishReasonError: the reply stopped at the token limit{spent}, before its JSON was "
                "complete (PARALLAX_MAX_TOKENS)")
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _checked(check: Callable[[T], object], value: T) -> None:
    try:
        check(value)
    except ValueError as exc:
        raise ParseFailure(str(exc)) from exc


class BranchError(RuntimeError):
    """A branch gave up (or its budget did not let it ask: `cause` "budget"); carries what it spent so the trace
    stays honest."""

    def __init__(self, message: str, *, attempts: int, reasks: int, tokens: dict[str, int], timeout: bool,
                 cause: str = "crash"):
        super().__init__(message)
        self.attempts, self.reasks, self.tokens, self.timeout, self.cause = attempts, reasks, tokens, timeout, cause


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

    `lifecycle` (state/lifecycle.py) records each attempt: IN_PROGRESS, then TIMEOUT or
    FAILED and RETRY when another attempt follows. The caller records the end
    (COMPLETED, or ESCALATED from the BranchError). `chat_model` replaces the default
    ChatOpenAI factory (Context.chat_model). `metadata` goes with every call to the
    callbacks, so LangSmith (LANGSMITH_TRACING=true) shows which branch made it. `check(value)`
    may raise ValueError for a reply that parses but cannot be used (a plan with a cycle): it is
    re-asked like bad JSON, with the check's message, inside the same branch. `services`: whose circuit
    breakers count the calls (runtime/services.py; default the process's). `seat`: the branch's place in its
    wave's one request with `n` (runtime/wave_request.py): its first attempt takes a choice of that request;
    re-asks and retries ask on their own. Under a budget (runtime/request_budget.py) each request is held at its worst
    case before it is sent, shrunk or not sent (`owner`: the branch whose record will carry its spend); a request
    not sent ends the branch with a BranchError of cause "budget"."""
    life = lifecycle or Lifecycle([{"state": "DISPATCHED", "at": 0.0, "reason": ""}])
    llm = await (chat_model or chat_models.chat_model)(model=model, timeout_s=timeout_s, max_tokens=max_tokens)
    call_kwargs: dict[str, Any] = {"temperature": temperature}
    current = settings_mod.load()
    kind = current.structured_output
    fmt = response_format(schema, kind)
    if fmt is not None:
        call_kwargs["response_format"] = fmt
    fmt_schema = fmt["json_schema"]["schema"] if fmt is not None and kind == "json_schema" else None
    if kind == "json_object_schema":  # llama.cpp ignores ChatOpenAI's max_completion_tokens
        call_kwargs["extra_body"] = {"max_tokens": max_tokens}
    # branch metadata for LangSmith; without tracing nobody reads it, and building a callback
    # configuration per call costs more than the rest of a fan-out branch
    config: RunnableConfig | None = (
        {"metadata": dict(metadata or {}), "tags": ["parallax", str((metadata or {}).get("kind", "call"))],
         "run_name": f"parallax {(metadata or {}).get('kind', 'call')}"} if current.langsmith_tracing else None)
    tokens = no_tokens()
    attempts = reasks = 0
    conversation = list(messages)

    base_url = getattr(llm, "openai_api_base", None)
    endpoint = str(base_url or type(llm).__name__)
    services = services or process_services()
    breaker = services.breaker_for(endpoint)
    model_name = str(getattr(llm, "model_name", "") or model or current.chat_model_name)
    price = price_of(price_table(current), model_name)

    def observe(spent: dict[str, int]) -> None:
        """What the endpoint served from its cache, for a prompt it may have read before (runtime/endpoint_seen.py)."""
        services.seen[(str(base_url), model_name)].observe(prompt_key(conversation), spent["prompt"], spent["cached_tokens"])

    def capped(cap: int) -> dict[str, Any]:
        """The call's arguments with its reply cap lowered to `cap` (a budget's shrink)."""
        lowered: dict[str, Any] = {**call_kwargs, "max_completion_tokens": cap}
        if kind == "json_object_schema":
            lowered["extra_body"] = {**call_kwargs.get("extra_body", {}), "max_tokens": cap}
        return lowered

    async def held(choices: int, owners: list[str], send: Callable[[int, dict[str, Any]], Awaitable[_R]],
                   usage: Callable[[_R], dict[str, int]]) -> _R:
        """`send(choices, call arguments)` held against the budgets of this request's run (runtime/request_budget.py):
        its worst case reserved first (the prompt counted, `max_tokens` per choice), the request shrunk to fit;
        its spend settled when it returns. BudgetRefused when nothing fits."""
        if not held_purses():
            result = await send(choices, call_kwargs)
            observe(usage(result))
            return result
        counter = services.counter_for(str(base_url or ""), model_name, current.api_key) if base_url else None
        if not budgeted():  # only counters of what was spent: nothing to hold, nothing to count first
            prompt, method = 0, "none"
        elif counter is not None:
            counted = await counter.count(conversation, fmt_schema)
            prompt, method = counted.tokens, counted.method
        else:  # a chat model handed in without an endpoint (tests): the estimate
            from parallax.runtime.token_count import as_dicts, estimate

            prompt, method = estimate(as_dicts(conversation)), "estimate"
        hold, granted, cap = reserve(Worst(prompt, choices, max_tokens, method, price), owners)
        try:
            result = await send(granted, call_kwargs if cap == max_tokens else capped(cap))
        except openai.LengthFinishReasonError as exc:
            settle(hold, length_usage(exc), price, model_name)
            if cap < max_tokens:  # cut at the cap the budget lowered: the budget's doing, and said so
                raise BudgetRefused(f"budget reached: the reply was cut at {cap} tokens, all that was left of "
                                    f"{hold_text(hold)}") from exc
            raise
        except openai.APIStatusError:  # answered with an error: nothing billed
            settle(hold, None, price, model_name)
            raise
        except BaseException:  # cancelled, timed out, the connection lost: it may be billed all the same
            keep_worst(hold, model_name)
            raise
        spent = usage(result)
        settle(hold, spent, price, model_name)
        observe(spent)
        return result

    def start() -> None:
        nonlocal attempts
        attempts += 1
        again = f"attempt {attempts}" + (f", re-ask {reasks}" if reasks else "")
        life.move("IN_PROGRESS", again if attempts > 1 else "")

    def failed(exc: BaseException) -> None:
        life.move("TIMEOUT" if is_timeout(exc) else "FAILED", _describe(exc))

    async def request(send: Callable[[], Awaitable[_R]], starting: bool = True) -> _R:
        """One HTTP request under the endpoint's breaker, connection slot, lease and timeout; `starting`: it
        begins an attempt (a seat whose wave's request gave it no choice is already in one)."""
        # an open circuit: wait for its probe if it comes back within this attempt's deadline
        probe = await breaker.admit(breaker.clock() + timeout_s)
        slots = endpoint_slot(base_url)
        async with slots:  # waiting for a slot is ours, not the endpoint's: outside the timeout
            await check_lease("model call")  # a run that lost its lease calls nothing (runtime/lease_check.py)
            if starting:
                start()
            try:
                async with asyncio.timeout(timeout_s):
                    reply = await send()
            except TRANSIENT_ERRORS as exc:
                breaker.record_failure(_describe(exc), probe=probe)
                if cause_of(exc) == "connection":  # refused or reset: fewer connections at once
                    slots.overloaded()
                if starting:
                    failed(exc)
                raise
            except BaseException:
                if probe:  # not the endpoint's fault: let the next call probe
                    breaker.release_probe()
                raise
        slots.succeeded()
        breaker.record_success()
        await check_lease("model reply")  # the lease was lost during the call: its reply is not used
        return reply

    def single(choices: int, kwargs: dict[str, Any]) -> Awaitable[AIMessage]:
        return llm.ainvoke(conversation, config, **kwargs)

    def one_usage(reply: AIMessage) -> dict[str, int]:
        return usage_sum([reply])

    def alone(starting: bool = True) -> Awaitable[AIMessage]:
        """This attempt's own request (one choice), held against the run's budgets."""
        return request(lambda: held(1, [owner] if owner else [], single, one_usage), starting)

    async def send_n(n: int, owners: list[str]) -> tuple[list[AIMessage], int]:
        """The wave's prompt once, for up to `n` choices (runtime/wave_request.py): (the replies, the choices asked;
        fewer than `n` when the run's budget fits no more)."""
        asked = n

        async def choices(granted: int, kwargs: dict[str, Any]) -> list[AIMessage]:
            nonlocal asked
            asked = granted
            result = await llm.agenerate([conversation], callbacks=(config or {}).get("callbacks"),
                                         tags=(config or {}).get("tags"), metadata=(config or {}).get("metadata"),
                                         run_name=(config or {}).get("run_name"),
                                         **{**({"n": granted} if granted > 1 else {}), **kwargs})
            replies = [cast(AIMessage, g.message) for g in result.generations[0] if isinstance(g, ChatGeneration)]
            fingerprint = (result.llm_output or {}).get("system_fingerprint")
            for reply in replies:  # LangChain leaves the response's own fields off the choices when there are several
                reply.response_metadata.setdefault("system_fingerprint", fingerprint)
            share_usage(replies)  # each choice its share of the one usage, before the budget settles the sum
            return replies

        replies = await request(lambda: held(n, owners, choices, usage_sum), starting=False)
        return replies, asked

    # `n` only on an OpenAI-compatible endpoint (a chat model with a base URL)
    seated = seat if seat is not None and base_url else None

    async def call_once() -> AIMessage:
        nonlocal seated
        if seated is None:
            return await alone()
        taking, seated = seated, None  # the first attempt: this vote's choice of its wave's one request
        start()
        try:
            choice = await taking.take((str(base_url), str(getattr(llm, "model_name", ""))), send_n)
        except TRANSIENT_ERRORS as exc:
            failed(exc)
            raise
        if choice is not None:
            return choice
        try:  # the endpoint does not take `n`, or gave this vote no choice: the same attempt, on its own
            return await alone(starting=False)
        except TRANSIENT_ERRORS as exc:
            failed(exc)
            raise

    try:
        while True:
            reply = await with_retries(call_once, max_attempts, life)
            add_usage(tokens, reply)
            try:
                value = parse_reply(str(reply.content), schema)
                if check is not None:
                    _checked(check, value)
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
    except BudgetRefused as exc:
        raise BranchError(str(exc), attempts=attempts, reasks=reasks, tokens=tokens, timeout=False,
                          cause="budget") from exc
    except (ParseFailure, CircuitOpen, *TRANSIENT_ERRORS, openai.APIError, openai.LengthFinishReasonError) as exc:
        if isinstance(exc, openai.LengthFinishReasonError):  # a reply cut at the cap still cost its tokens
            cut = length_usage(exc)
            for name in ("prompt", "completion", "total", "cached_tokens"):
                tokens[name] += cut[name]
        message = _describe(exc)
        if isinstance(exc, TRANSIENT_ERRORS) and breaker.failing_since is not None:  # which endpoint, since when
            message += f" ({endpoint}, failing since {clock_time(breaker.failing_since)})"
        raise BranchError(message, attempts=attempts, reasks=reasks, tokens=tokens, timeout=is_timeout(exc),
                          cause=cause_of(exc)) from exc
