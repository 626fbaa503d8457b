"""One model call of a branch, turned into its trace record.

Shared by every kind of branch (work, judge, red team) so that attempts, re-asks,
latency, tokens and errors are recorded the same way everywhere.
"""

from __future__ import annotations

import time
from typing import TypeVar

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from parallax.structured import BranchError, ask
from state.context import Context
from state.payloads import BranchRecord

T = TypeVar("T", bound=BaseModel)


async def call_branch(
    record: dict, messages: list[BaseMessage], schema: type[T], ctx: Context, *, model: str, temperature: float
) -> tuple[BranchRecord, T | None]:
    """(record, parsed reply); the reply is None when the branch failed or timed out."""
    started = time.perf_counter()
    fields = {**record, "model": model or None, "temperature": temperature}
    try:
        result = await ask(messages, schema, model=model, temperature=temperature, timeout_s=ctx.request_timeout_s,
                           max_attempts=ctx.max_attempts, max_reasks=ctx.max_reasks, max_tokens=ctx.max_tokens)
    except BranchError as exc:
        latency = round((time.perf_counter() - started) * 1000, 2)
        return BranchRecord(**fields, status="timeout" if exc.timeout else "failed", error=str(exc)[:500],
                            attempts=exc.attempts, reasks=exc.reasks, tokens=exc.tokens, latency_ms=latency), None
    latency = round((time.perf_counter() - started) * 1000, 2)
    return BranchRecord(**fields, status="ok", output=result.value.model_dump(), attempts=result.attempts,
                        reasks=result.reasks, tokens=result.tokens, latency_ms=latency), result.value
