"""A model request held against its run's budgets: reserved at its worst case, shrunk, settled.

Its worst case is reserved before it is sent (runtime/request_budget.py), the request shrunk to
fit what is left, and its spend settled when it returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import openai
from langchain_core.messages import BaseMessage

from parallax.runtime.call_setup import CallFormat, Endpoint
from parallax.runtime.call_usage import length_usage
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

R = TypeVar("R")


async def prompt_tokens(
    endpoint: Endpoint, conversation: list[BaseMessage], call: CallFormat
) -> tuple[int, str]:
    """The prompt's tokens as a budget counts them, and how they were counted."""
    base_url = endpoint.base_url
    counter = (
        endpoint.services.counter_for(
            str(base_url or ""), endpoint.model_name, endpoint.settings.api_key
        )
        if base_url
        else None
    )
    if not budgeted():  # only counters of what was spent: nothing to hold, nothing to count first
        return 0, "none"
    if counter is not None:
        counted = await counter.count(conversation, call.schema)
        return counted.tokens, counted.method
    # a chat model handed in without an endpoint (tests): the estimate
    from parallax.runtime.token_count import as_dicts, estimate

    return estimate(as_dicts(conversation)), "estimate"


async def held(
    endpoint: Endpoint,
    call: CallFormat,
    conversation: list[BaseMessage],
    choices: int,
    owners: list[str],
    send: Callable[[int, dict[str, Any]], Awaitable[R]],
    usage: Callable[[R], dict[str, int]],
) -> R:
    """`send(choices, call arguments)` held against the budgets of this request's run: its worst
    case reserved first (the prompt counted, `max_tokens` per choice), the request shrunk to fit;
    its spend settled when it returns. BudgetRefused when nothing fits.

    Args:
        owners: the branches whose records will carry the request's spend.
        usage: the tokens a result of `send` spent.
    """
    if not held_purses():
        result = await send(choices, call.kwargs)
        endpoint.observe(conversation, usage(result))
        return result
    prompt, method = await prompt_tokens(endpoint, conversation, call)
    price, model_name = endpoint.price, endpoint.model_name
    hold, granted, cap = reserve(Worst(prompt, choices, call.max_tokens, method, price), owners)
    try:
        result = await send(granted, call.capped(cap))
    except openai.LengthFinishReasonError as exc:
        settle(hold, length_usage(exc), price, model_name)
        if (
            cap < call.max_tokens
        ):  # cut at the cap the budget lowered: the budget's doing, and said so
            raise BudgetRefused(
                f"budget reached: the reply was cut at {cap} tokens, all that was left of "
                f"{hold_text(hold)}"
            ) from exc
        raise
    except openai.APIStatusError:  # answered with an error: nothing billed
        settle(hold, None, price, model_name)
        raise
    except (
        BaseException
    ):  # cancelled, timed out, the connection lost: it may be billed all the same
        keep_worst(hold, model_name)
        raise
    spent = usage(result)
    settle(hold, spent, price, model_name)
    endpoint.observe(conversation, spent)
    return result
