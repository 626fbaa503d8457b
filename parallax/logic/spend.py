"""What a run spent: tokens and USD over its branch records; unknown when a model has no price."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from parallax.state.records import Spend


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def spend_of(branches: Iterable[Mapping[str, Any]]) -> Spend:
    """The sum over `branches` (branch records as dicts, in a state or a trace)."""
    tokens = prompt = cached = completion = 0
    cost = 0.0
    unpriced: set[str] = set()
    for branch in branches:
        counts = branch.get("tokens") or {}
        spent = _int(counts.get("total")) or _int(counts.get("prompt")) + _int(
            counts.get("completion")
        )
        tokens += spent
        prompt += _int(counts.get("prompt"))
        completion += _int(counts.get("completion"))
        cached += _int(
            counts.get("cached", counts.get("cached_tokens", branch.get("cached_tokens", 0)))
        )
        value = branch.get("cost_usd")
        if isinstance(value, (int, float)):
            cost += value
        elif spent:
            unpriced.add(str(branch.get("model") or "the endpoint's default model"))
    return {
        "tokens": tokens,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "completion_tokens": completion,
        "cost_usd": None if unpriced else round(cost, 8),
        "unpriced": sorted(unpriced),
    }


def cost_text(spend: Mapping[str, Any]) -> str:
    """`$0.0123`, or `unknown (no price for MODEL)`: how a person reads a run's cost."""
    cost = spend.get("cost_usd")
    if cost is None:
        models = ", ".join(spend.get("unpriced") or []) or "its model"
        return f"unknown (no price for {models}: set PARALLAX_PRICES)"
    return f"${cost:.4f}" if cost < 100 else f"${cost:,.2f}"
