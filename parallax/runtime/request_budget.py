"""A run's budget held before each request: its worst case reserved, else shrunk or not sent.

See docs/internals/model-calls.md#budgets-held-before-each-request.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from parallax.runtime.prices import Price
from parallax.state.records import Limits

MIN_REPLY_SHARE = 0.25
"""A request's `max_tokens` is lowered to fit a budget at most to this share of it (and at least
MIN_REPLY_TOKENS): a reply cut shorter than that is rarely whole JSON, so its tokens would be paid
for nothing."""
MIN_REPLY_TOKENS = 16


class BudgetRefused(Exception):
    """A request (or a choice of a wave's request) was not sent: it does not fit what is left of a
    budget."""


@dataclass(frozen=True)
class Worst:
    """A request's shape before it is sent: its counted prompt, its choices and reply cap, and the
    price per token."""

    prompt_tokens: int
    choices: int
    max_tokens: int
    counted_by: str
    price: Price | None
    """None: the model has no price (a cost budget cannot be held for it)."""

    def tokens(self, choices: int | None = None, max_tokens: int | None = None) -> int:
        return self.prompt_tokens + (self.choices if choices is None else choices) * (
            self.max_tokens if max_tokens is None else max_tokens
        )

    def cost(self, choices: int | None = None, max_tokens: int | None = None) -> float | None:
        if self.price is None:
            return None
        reply = (self.choices if choices is None else choices) * (
            self.max_tokens if max_tokens is None else max_tokens
        )
        return (self.prompt_tokens * self.price.input + reply * self.price.output) / 1_000_000


@dataclass
class Hold:
    """What one request holds of each purse until it returns."""

    owners: list[str]
    tokens: int
    cost: float
    purses: list[Purse] = field(default_factory=list)
    done: bool = False


def _money(value: float) -> str:
    return f"${value:.6f}"


class Purse:
    """One budget's live tally: spent (requests returned, branch records counted), held (requests in
    flight)."""

    def __init__(
        self,
        limits: Limits | None = None,
        tokens: int = 0,
        cost: float = 0.0,
        unpriced: Iterable[str] = (),
    ) -> None:
        self.limits: Limits = dict(limits or {})  # type: ignore[assignment]
        self.tokens, self.cost, self.unpriced = tokens, cost, set(unpriced)
        self.held_tokens, self.held_cost = 0, 0.0
        self.counted: set[str] = set()
        """Branch records counted, or whose requests were counted as they returned (a record counts
        once)."""
        self.refused = 0
        self.requests = 0

    # -- what is left
    # ------------------------------------------------------------------------------------------
    def left(self) -> tuple[int | None, float | None]:
        """(tokens, USD) left after what was spent and what is in flight; None: no such limit."""
        max_tokens, max_cost = self.limits.get("max_tokens"), self.limits.get("max_cost")
        return (
            None if max_tokens is None else max_tokens - self.tokens - self.held_tokens,
            None if max_cost is None else max_cost - self.cost - self.held_cost,
        )

    def describe(self) -> str:
        """The budget and its figures: "max_tokens 300 (0 spent, 0 in flight, 300 left)"."""
        parts = []
        if (max_tokens := self.limits.get("max_tokens")) is not None:
            parts.append(
                f"max_tokens {max_tokens} ({self.tokens} spent, {self.held_tokens} in flight, "
                f"{max_tokens - self.tokens - self.held_tokens} left)"
            )
        if (max_cost := self.limits.get("max_cost")) is not None:
            parts.append(
                f"max_cost ${max_cost:g} ({_money(self.cost)} spent, {_money(self.held_cost)} in"
                f" flight, {_money(max_cost - self.cost - self.held_cost)} left)"
            )
        return " and ".join(parts)

    def fit(self, worst: Worst) -> tuple[int, int] | str:
        """(choices, max_tokens) of the largest request of `worst`'s shape that fits what is left,
        or why none does. Fewer choices first, then a lower reply cap down to MIN_REPLY_SHARE of it.
        """
        left_tokens, left_cost = self.left()
        if left_cost is not None and worst.price is None:
            return (
                "cost unknown (no price for the model), so max_cost"
                f" ${self.limits.get('max_cost'):g} cannot be held"
            )

        def fits(choices: int, cap: int) -> bool:
            cost = worst.cost(choices, cap)
            return (left_tokens is None or worst.tokens(choices, cap) <= left_tokens) and (
                left_cost is None or (cost is not None and cost <= left_cost + 1e-12)
            )

        for choices in range(worst.choices, 0, -1):
            if fits(choices, worst.max_tokens):
                return choices, worst.max_tokens
        floor = min(
            worst.max_tokens, max(MIN_REPLY_TOKENS, int(worst.max_tokens * MIN_REPLY_SHARE))
        )
        low, high = floor, worst.max_tokens - 1
        if low > high or not fits(1, low):
            return (
                f"a request of {worst.prompt_tokens} prompt tokens (counted by {worst.counted_by})"
                f" and up to {worst.max_tokens} reply tokens x {worst.choices} does not fit"
            )
        while low < high:  # the highest cap that fits
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(1, middle) else (low, middle - 1)
        return 1, low

    # -- holding and settling
    # ------------------------------------------------------------------------------------
    def _hold(self, hold: Hold) -> None:
        self.held_tokens += hold.tokens
        self.held_cost += hold.cost
        self.requests += 1

    def _settle(self, hold: Hold, tokens: int, cost: float | None, model: str) -> None:
        with _LOCK:
            self.held_tokens -= hold.tokens
            self.held_cost -= hold.cost
            self.tokens += tokens
            if cost is None:
                if tokens:
                    self.unpriced.add(model)
            else:
                self.cost += cost
            self.counted.update(hold.owners)

    def add_spend(self, tokens: int, cost: float | None, unpriced: Iterable[str] = ()) -> None:
        """Count spend made outside a hold (a record of a branch this tally did not see ask)."""
        with _LOCK:
            self.tokens += tokens
            if cost is None:
                self.unpriced.update(unpriced)
            else:
                self.cost += cost

    def spent(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "cost_usd": None if self.unpriced else round(self.cost, 10),
            "unpriced": sorted(self.unpriced),
        }


_LOCK = threading.RLock()
"""Guards every purse's figures: a check and its hold are one step, whichever thread's event loop
asks."""
_HOLDING: contextvars.ContextVar[tuple[Purse, ...]] = contextvars.ContextVar(
    "parallax_purses", default=()
)


@contextlib.contextmanager
def holding(*purses: Purse | None) -> Iterator[None]:
    """The model requests made inside (in this task and the tasks it starts) must fit `purses` too
    (None: skipped; a purse already held is not held twice)."""
    current = _HOLDING.get()
    added = tuple(
        p for p in dict.fromkeys(purses) if p is not None and all(p is not q for q in current)
    )
    token = _HOLDING.set(current + added)
    try:
        yield
    finally:
        _HOLDING.reset(token)


def held_purses() -> tuple[Purse, ...]:
    """The purses a request made here must fit."""
    return _HOLDING.get()


def budgeted() -> bool:
    """Whether a request made here is held against a budget (a purse with limits)."""
    return any(p.limits for p in _HOLDING.get())


def reserve(worst: Worst, owners: list[str]) -> tuple[Hold, int, int]:
    """Hold the largest request of `worst`'s shape that fits every purse held here: (hold, choices,
    max_tokens). Raises BudgetRefused (the reason names the budget and its figures) when none fits.
    """
    purses = held_purses()
    choices, cap = worst.choices, worst.max_tokens
    with _LOCK:
        for purse in purses:
            if not purse.limits:
                continue
            fitted = purse.fit(
                Worst(worst.prompt_tokens, choices, cap, worst.counted_by, worst.price)
            )
            if isinstance(fitted, str):
                purse.refused += 1
                raise BudgetRefused(
                    f"budget reached: {fitted} in what is left of {purse.describe()}"
                )
            choices, cap = fitted
        hold = Hold(
            list(owners), worst.tokens(choices, cap), worst.cost(choices, cap) or 0.0, list(purses)
        )
        for purse in purses:
            purse._hold(hold)
    return hold, choices, cap


def hold_text(hold: Hold) -> str:
    """The budgets a request was held against, with their figures."""
    return " and ".join(p.describe() for p in hold.purses if p.limits)


def settle(hold: Hold, usage: Mapping[str, Any] | None, price: Price | None, model: str) -> None:
    """The request returned (`usage`: {prompt, completion, cached_tokens} as reported) or failed
    without a bill (None: nothing spent): its hold becomes what it spent. Once per hold."""
    if hold.done:
        return
    hold.done = True
    tokens, cost = 0, 0.0
    if usage is not None:
        prompt, completion = int(usage.get("prompt") or 0), int(usage.get("completion") or 0)
        cached = min(prompt, int(usage.get("cached_tokens") or 0))
        tokens = prompt + completion
        cost_or_none = (
            None
            if price is None
            else (
                (
                    (prompt - cached) * price.input
                    + cached
                    * (price.cached_input if price.cached_input is not None else price.input)
                    + completion * price.output
                )
                / 1_000_000
            )
        )
        for purse in hold.purses:
            purse._settle(hold, tokens, cost_or_none, model)
        return
    for purse in hold.purses:
        purse._settle(hold, tokens, cost, model)


def keep_worst(hold: Hold, model: str) -> None:
    """A request cancelled in flight: its worst case stays spent (an endpoint may bill it all the
    same)."""
    if hold.done:
        return
    hold.done = True
    for purse in hold.purses:
        purse._settle(hold, hold.tokens, hold.cost, model)
