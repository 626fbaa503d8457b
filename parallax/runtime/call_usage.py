"""A model call's token counts, in the shape a branch's trace keeps them."""

from __future__ import annotations

import openai
from langchain_core.messages import AIMessage

TOKEN_KEYS = ("prompt", "completion", "total", "cached_tokens")


def no_tokens() -> dict[str, int]:
    """A branch's token counts before its first call; `cached_tokens` are the prompt tokens the
    endpoint read from its prefix cache (`usage.prompt_tokens_details.cached_tokens`), part of
    `prompt`."""
    return {"prompt": 0, "completion": 0, "total": 0, "cached_tokens": 0}


def usage_sum(replies: list[AIMessage]) -> dict[str, int]:
    """The summed `usage_metadata` of a request's replies (each choice carries its share:
    runtime/wave_request.py)."""
    total = no_tokens()
    for reply in replies:
        add_usage(total, reply)
    return total


def length_usage(exc: openai.LengthFinishReasonError) -> dict[str, int]:
    """What a reply cut at the token limit cost: openai's error carries the completion and its
    usage."""
    usage = getattr(exc.completion, "usage", None)
    prompt, completion = (
        getattr(usage, "prompt_tokens", 0) or 0,
        getattr(usage, "completion_tokens", 0) or 0,
    )
    details = getattr(usage, "prompt_tokens_details", None)
    return {
        "prompt": prompt,
        "completion": completion,
        "total": getattr(usage, "total_tokens", 0) or prompt + completion,
        "cached_tokens": getattr(details, "cached_tokens", 0) or 0,
    }


def add_usage(tokens: dict[str, int], message: AIMessage) -> None:
    """Add a model reply's `usage_metadata` to `tokens` (the shape of `no_tokens`)."""
    usage = getattr(message, "usage_metadata", None) or {}
    tokens["prompt"] += usage.get("input_tokens", 0)
    tokens["completion"] += usage.get("output_tokens", 0)
    tokens["total"] += usage.get("total_tokens", 0)
    tokens["cached_tokens"] += (usage.get("input_token_details") or {}).get("cache_read") or 0


def add_tokens(tokens: dict[str, int], more: dict[str, int]) -> None:
    """Add counts of the shape of `no_tokens` to `tokens`."""
    for name in TOKEN_KEYS:
        tokens[name] += more[name]
