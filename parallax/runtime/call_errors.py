"""How a branch's model call fails: one line for its error, and the BranchError that ends it."""

from __future__ import annotations

import openai

from parallax.runtime.call_usage import add_tokens, length_usage
from parallax.runtime.circuit_breaker import CircuitBreaker, clock_time
from parallax.runtime.failure_cause import cause_of
from parallax.runtime.request_budget import BudgetRefused
from parallax.runtime.retry import TRANSIENT_ERRORS, is_timeout


def describe(exc: BaseException) -> str:
    """One line for a branch's error. openai's length error would print the whole usage object;
    what a reader needs is that the reply ran out of tokens, after how many, and which knob sets
    it."""
    if isinstance(exc, openai.LengthFinishReasonError):
        usage = getattr(exc.completion, "usage", None)
        spent = (
            f" after {usage.completion_tokens} tokens" if usage and usage.completion_tokens else ""
        )
        return (
            f"LengthFinishReasonError: the reply stopped at the token limit{spent}, before its "
            "JSON was complete (PARALLAX_MAX_TOKENS)"
        )
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class BranchError(RuntimeError):
    """A branch gave up (or its budget did not let it ask: `cause` "budget"); carries what it
    spent so the trace stays honest."""

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        reasks: int,
        tokens: dict[str, int],
        timeout: bool,
        cause: str = "crash",
    ):
        super().__init__(message)
        self.attempts, self.reasks, self.tokens, self.timeout, self.cause = (
            attempts,
            reasks,
            tokens,
            timeout,
            cause,
        )


def branch_error(
    exc: BaseException,
    *,
    attempts: int,
    reasks: int,
    tokens: dict[str, int],
    endpoint: str,
    breaker: CircuitBreaker,
) -> BranchError:
    """The BranchError for what ended a call: a budget's refusal as cause "budget"; a reply cut
    at the cap with the tokens it still cost added to `tokens`; a transient error naming its
    failing endpoint and since when."""
    if isinstance(exc, BudgetRefused):
        return BranchError(
            str(exc), attempts=attempts, reasks=reasks, tokens=tokens, timeout=False, cause="budget"
        )
    if isinstance(
        exc, openai.LengthFinishReasonError
    ):  # a reply cut at the cap still cost its tokens
        add_tokens(tokens, length_usage(exc))
    message = describe(exc)
    if (
        isinstance(exc, TRANSIENT_ERRORS) and breaker.failing_since is not None
    ):  # which endpoint, since when
        message += f" ({endpoint}, failing since {clock_time(breaker.failing_since)})"
    return BranchError(
        message,
        attempts=attempts,
        reasks=reasks,
        tokens=tokens,
        timeout=is_timeout(exc),
        cause=cause_of(exc),
    )
