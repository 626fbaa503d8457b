"""The price table, and one branch's tokens in US dollars (None when the model has no price).

See docs/configuration.md#prices-and-budgets.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from parallax.runtime.settings import EMBEDDED_MODEL, Settings, SettingsError

PRICES_DATE = "2025-06-01"
"""When the default prices were copied from OpenAI's pricing page
(platform.openai.com/docs/pricing)."""
PRICES_FILE = "prices.json"
"""The file in the home a deployment may keep its prices in (docs/configuration.md)."""
PER = 1_000_000


class Price(BaseModel):
    """USD per million tokens of one model."""

    model_config = {"extra": "forbid", "frozen": True}

    input: float = Field(ge=0, description="prompt tokens, USD per million")
    cached_input: float | None = Field(
        None,
        ge=0,
        description=(
            "prompt tokens served from the provider's prefix "
            "cache, USD per million (default: input)"
        ),
    )
    output: float = Field(ge=0, description="completion tokens, USD per million")

    @model_validator(mode="after")
    def _cached_defaults_to_input(self) -> Price:
        if self.cached_input is None:
            object.__setattr__(self, "cached_input", self.input)
        return self


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(input=0.15, cached_input=0.075, output=0.60),
    "gpt-4o": Price(input=2.50, cached_input=1.25, output=10.00),
    "gpt-4.1": Price(input=2.00, cached_input=0.50, output=8.00),
    "gpt-4.1-mini": Price(input=0.40, cached_input=0.10, output=1.60),
    "gpt-4.1-nano": Price(input=0.10, cached_input=0.025, output=0.40),
    EMBEDDED_MODEL: Price(input=0, cached_input=0, output=0),
}
"""OpenAI's list prices on PRICES_DATE, and the embedded model (free: it runs here)."""

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def _parse(text: str, where: str) -> dict[str, Price]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{where} is not JSON ({exc.msg} at line {exc.lineno}): give "
            '{"model": {"input": USD, "cached_input": USD, "output": USD}} per million tokens'
        ) from None
    if not isinstance(raw, dict):
        raise SettingsError(
            f"{where} must be a JSON object of model -> {{input, cached_input, output}}"
        )
    table: dict[str, Price] = {}
    for model, price in raw.items():
        try:
            table[str(model)] = Price.model_validate(price)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "price"
            raise SettingsError(
                f"{where}: model {model!r}, {field}: {first['msg']} (USD per million tokens: "
                "input, output, optional cached_input, each >= 0)"
            ) from None
    return table


@functools.lru_cache(maxsize=8)
def _table(env: str | None, file_text: str | None, file_path: str) -> dict[str, Price]:
    table = dict(DEFAULT_PRICES)
    if file_text is not None:
        table.update(_parse(file_text, file_path))
    if env:
        table.update(_parse(env, "PARALLAX_PRICES"))
    return table


@functools.lru_cache(maxsize=8)
def _file_text(path: Path, _mtime_ns: int) -> str:
    return path.read_text(encoding="utf-8")


_read: tuple[Settings, dict[str, Price]] | None = None


def price_table(settings: Settings) -> dict[str, Price]:
    """The prices in force: the defaults, the home's prices.json, then PARALLAX_PRICES
    (SettingsError when bad). Read once per settings read, as every setting is (a CLI command, a
    Python API call, `reload_settings()`): a branch's cost is then a dictionary look-up, not a file
    check."""
    global _read
    if _read is not None and _read[0] is settings:
        return _read[1]
    table = _read_table(settings)
    _read = (settings, table)
    return table


def _read_table(settings: Settings) -> dict[str, Price]:
    path = settings.home / PRICES_FILE
    try:
        text: str | None = _file_text(path, path.stat().st_mtime_ns)
    except FileNotFoundError:
        text = None
    return _table(settings.prices, text, str(path))


def price_of(table: Mapping[str, Price], model: str) -> Price | None:
    """The model's price: by its name, else by its name without a date suffix (gpt-4o-2024-08-06 ->
    gpt-4o)."""
    return table.get(model) or table.get(_DATED.sub("", model))


def cached_of(tokens: Mapping[str, Any]) -> int:
    """Prompt tokens the provider served from its cache: the record's `cached` count, 0 when
    absent."""
    value = tokens.get("cached", tokens.get("cached_tokens", 0))
    return value if isinstance(value, int) else 0


def branch_cost(
    table: Mapping[str, Price], model: str, tokens: Mapping[str, Any], cached: int | None = None
) -> float | None:
    """USD for `tokens` ({prompt, completion, cached?}) of `model`; None when the table has no price
    for it. `cached` prompt tokens are billed at the cached rate, the rest of the prompt at the
    input rate.
    """
    prompt, completion = int(tokens.get("prompt") or 0), int(tokens.get("completion") or 0)
    if not prompt and not completion:
        return 0.0
    price = price_of(table, model)
    if price is None:
        return None
    hit = min(prompt, cached if cached is not None else cached_of(tokens))
    cached_rate = price.cached_input if price.cached_input is not None else price.input
    return ((prompt - hit) * price.input + hit * cached_rate + completion * price.output) / PER
