"""What outlives one run: the process's services, reached through the run's Context.

See docs/internals/process.md#services.
"""

from __future__ import annotations

import uuid
import weakref
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from parallax.runtime import settings as settings_mod
from parallax.runtime.circuit_breaker import CircuitBreaker
from parallax.runtime.endpoint_seen import EndpointSeen
from parallax.runtime.token_count import Counter
from parallax.state.context import Context

T = TypeVar("T")
RECENT = 200
"""Branch durations kept per model, for fan-outs with too few finished siblings to compare with."""
VOTES_SEEN = 500
"""Finished votes kept per model (their answer counts and reply tokens), which a vote's plan is
priced by."""


def _recent() -> defaultdict[str, deque[float]]:
    return defaultdict(lambda: deque(maxlen=RECENT))


def _votes_seen() -> defaultdict[str, deque[tuple[tuple[int, ...], float]]]:
    return defaultdict(lambda: deque(maxlen=VOTES_SEEN))


@dataclass(eq=False)
class Services:
    """Per process (or per test): the circuit breaker of each endpoint, the recent branch durations
    of each model, which endpoints take `n` (several choices of one prompt), how each endpoint's
    prompts are counted, and what the tasks of one fan-out share (its call limit, straggler and vote
    watches, a plan's task board)."""

    breakers: dict[str, CircuitBreaker] = field(default_factory=dict)
    takes_n: dict[tuple[str, str], bool] = field(default_factory=dict)
    """(base URL, model) -> whether the endpoint answered a request with `n` with as many choices
    (runtime/wave_request.py); learned on the first wave asked, kept for the process's life."""
    recent: defaultdict[str, deque[float]] = field(default_factory=_recent)
    counters: dict[tuple[str, str], Counter] = field(default_factory=dict)
    """(base URL, model) -> how its prompts are counted before a request is sent
    (runtime/token_count.py)."""
    seen: defaultdict[tuple[str, str], EndpointSeen] = field(
        default_factory=lambda: defaultdict(EndpointSeen)
    )
    """(base URL, model) -> how much of a prompt sent again it served from its cache
    (runtime/endpoint_seen.py)."""
    votes_seen: defaultdict[str, deque[tuple[tuple[int, ...], float]]] = field(
        default_factory=_votes_seen
    )
    """model -> its last votes' answer counts and mean reply tokens (logic/vote_pricing.py)."""
    _shared: weakref.WeakValueDictionary[tuple[object, ...], Any] = field(
        default_factory=weakref.WeakValueDictionary
    )
    _held: dict[tuple[object, ...], Any] = field(default_factory=dict)

    def breaker_for(self, endpoint: str) -> CircuitBreaker:
        """The breaker of an endpoint (the PARALLAX_BREAKER_* settings), made on its first call."""
        breaker = self.breakers.get(endpoint)
        if breaker is None:
            s = settings_mod.load()
            breaker = self.breakers.setdefault(
                endpoint,
                CircuitBreaker(
                    endpoint,
                    failure_rate=s.breaker_failure_rate,
                    min_calls=s.breaker_min_calls,
                    min_failures=s.breaker_failures,
                    window_s=s.breaker_window_s,
                    coalesce_s=s.breaker_coalesce_s,
                    reset_s=s.breaker_reset_s,
                ),
            )
        return breaker

    def counter_for(self, base_url: str, model: str, api_key: str = "") -> Counter:
        """The prompt counter of an endpoint and model (its tokenizer found on its first count)."""
        counter = self.counters.get((base_url, model))
        if counter is None:
            counter = self.counters.setdefault((base_url, model), Counter(base_url, model, api_key))
        return counter

    def open_circuits(self) -> int:
        """How many endpoints' circuits are not closed (open, or half-open waiting for a probe)."""
        return sum(breaker.state != "closed" for breaker in list(self.breakers.values()))

    def shared(self, fan_out: str, make: Callable[[], T], *key: object) -> T:
        """One object per (fan-out, `key`), shared by every task of the fan-out; it lives as long as
        a task holds it."""
        full = (fan_out, *key)
        found = self._shared.get(full)
        if found is None:
            found = self._shared[full] = make()
        return found

    def held(
        self, fan_out: str, make: Callable[[], T], *key: object
    ) -> tuple[T, Callable[[], None]]:
        """Like `shared`, but kept until `release()` is called, not just while a task holds it: for
        coordination where a task that starts late must still find what finished tasks left."""
        full = (fan_out, *key)
        if full not in self._held:
            self._held[full] = make()
        return self._held[full], lambda: self._held.pop(full, None)


def new_fan_out() -> str:
    """A fan-out's name, made by the node that sends it and carried in every `Send` payload of
    it."""
    return uuid.uuid4().hex


_process: Services | None = None


def process_services() -> Services:
    """The services of this process: what runs whose Context names none use (the CLI, the API,
    served graphs)."""
    global _process
    if _process is None:
        _process = Services()
    return _process


def renew_process_services() -> Services:
    """A fresh process Services, with the settings re-read on their next use (tests start from one;
    a long-lived process after a configuration change)."""
    global _process
    settings_mod.reload_settings()
    _process = Services()
    return _process


def services_of(ctx: Context) -> Services:
    """The run's services: its Context's, else the process's."""
    given = ctx.services
    return given if isinstance(given, Services) else process_services()
