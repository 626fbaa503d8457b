"""One model call of a branch, turned into its trace record the same way for every branch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from parallax.runtime.prices import branch_cost, price_table
from parallax.runtime.services import services_of
from parallax.runtime.settings import Settings
from parallax.runtime.settings import load as load_settings
from parallax.runtime.structured_call import BranchError, ask
from parallax.runtime.wave_request import Seat
from parallax.state.context import Context
from parallax.state.lifecycle import Lifecycle
from parallax.state.payloads import BranchRecord

T = TypeVar("T", bound=BaseModel)


def _cost(settings: Settings, model: str, tokens: dict[str, int]) -> float | None:
    """The call's cost at the prices in force, for the model it asked (the endpoint's usual one when
    unnamed)."""
    return branch_cost(price_table(settings), model or settings.chat_model_name, tokens)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


async def call_branch(
    record: dict[str, Any],
    messages: list[BaseMessage],
    schema: type[T],
    ctx: Context,
    *,
    model: str,
    temperature: float,
    lifecycle: Lifecycle | None = None,
    run_metadata: dict[str, Any] | None = None,
    check: Callable[[T], object] | None = None,
    seat: Seat | None = None,
) -> tuple[BranchRecord, T | None]:
    """(record, parsed reply); the reply is None when the branch failed or timed out.

    `ctx` must be resolved (runtime/run_context.py). `lifecycle` carries the branch's transitions so
    far (a fan-out branch arrives DISPATCHED); a call made on its own (judge, red team, reflect,
    curate) starts one here. The record ends COMPLETED or ESCALATED; a cancelled call ends CANCELLED
    and re-raises. The call's callback metadata (LangSmith) names the branch (id, kind, parent,
    prompt) plus `run_metadata` (the run's trace id, playbook and prompt versions). `check` rejects
    a parsed reply with a ValueError, which is re-asked (runtime/structured_call.py). `seat`: a
    vote's place in its wave's one request with `n` (runtime/wave_request.py). A call the run's
    budget did not let ask (runtime/request_budget.py) ends `cancelled`, its `cause` "budget" and
    its `error` the budget's reason, with what it had spent.
    """
    if lifecycle is None:
        lifecycle = Lifecycle()
        lifecycle.move("PENDING")
        lifecycle.move("DISPATCHED")
    started = time.perf_counter()
    fields = {**record, "model": model or None, "temperature": temperature}
    prompt = record.get("prompt") or {}
    metadata = {
        **(run_metadata or {}),
        "parallax_branch_id": record["id"],
        "kind": record["kind"],
        "parent_id": record["parent_id"],
        "prompt": prompt.get("name"),
        "prompt_version": prompt.get("version"),
    }
    timeout_s, max_attempts, max_tokens, max_reasks = (
        ctx.request_timeout_s,
        ctx.max_attempts,
        ctx.max_tokens,
        ctx.max_reasks,
    )
    if timeout_s is None or max_attempts is None or max_tokens is None or max_reasks is None:
        raise TypeError("call_branch needs a resolved Context (runtime/run_context.py)")
    services = services_of(ctx)
    try:
        result = await ask(
            messages,
            schema,
            model=model,
            temperature=temperature,
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            max_reasks=max_reasks,
            max_tokens=max_tokens,
            lifecycle=lifecycle,
            chat_model=ctx.chat_model,
            metadata=metadata,
            check=check,
            services=services,
            seat=seat,
            owner=record["id"],
        )
    except BranchError as exc:
        latency = round((time.perf_counter() - started) * 1000, 2)
        if exc.cause == "budget":
            lifecycle.finish("CANCELLED", str(exc))
            return (
                BranchRecord(
                    **fields,
                    status="cancelled",
                    error=str(exc)[:500],
                    cause="budget",
                    attempts=exc.attempts,
                    reasks=exc.reasks,
                    tokens=exc.tokens,
                    latency_ms=latency,
                    cost_usd=_cost(load_settings(), model, exc.tokens),
                    state=lifecycle.state,
                    transitions=lifecycle.transitions,
                ),
                None,
            )
        # an open circuit fails before any attempt: the FAILED step then carries the error
        lifecycle.finish(
            "ESCALATED",
            f"gave up after {_count(exc.attempts, 'attempt')} and {_count(exc.reasks, 're-ask')}",
            failure=str(exc),
        )
        failed = BranchRecord(
            **fields,
            status="timeout" if exc.timeout else "failed",
            error=str(exc)[:500],
            cause=exc.cause,
            attempts=exc.attempts,
            reasks=exc.reasks,
            tokens=exc.tokens,
            latency_ms=latency,
            cost_usd=_cost(load_settings(), model, exc.tokens),
            state=lifecycle.state,
            transitions=lifecycle.transitions,
        )
        return failed, None
    except asyncio.CancelledError:
        lifecycle.finish("CANCELLED", "cancelled")
        raise
    latency = round((time.perf_counter() - started) * 1000, 2)
    lifecycle.move("COMPLETED")
    done = BranchRecord(
        **fields,
        status="ok",
        output=result.value.model_dump(),
        attempts=result.attempts,
        reasks=result.reasks,
        tokens=result.tokens,
        latency_ms=latency,
        cost_usd=_cost(load_settings(), model, result.tokens),
        state=lifecycle.state,
        transitions=lifecycle.transitions,
    )
    return done, result.value
