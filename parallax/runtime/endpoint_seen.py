"""How much of a repeated prompt an endpoint serves from its cache, as this process has seen it.

See docs/internals/model-calls.md#what-an-endpoint-caches.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

KEPT = 2048
"""Prompt keys remembered per endpoint and model."""
NO_CACHE_AFTER = 20
"""Requests with nothing read from a cache after which an endpoint is taken to keep no prefix cache.
"""


def prompt_key(messages: Sequence[BaseMessage]) -> int:
    """A cheap key of a request's prompt (a collision only blurs the share a little)."""
    last = str(messages[-1].content) if messages else ""
    return hash(
        (len(messages), tuple(len(str(m.content)) for m in messages), last[:80], last[-80:])
    )


class EndpointSeen:
    """One endpoint and model: prompts sent, and the cached share of those sent again."""

    def __init__(self) -> None:
        self.sent: OrderedDict[int, None] = OrderedDict()
        self.repeated_prompt = 0
        self.repeated_cached = 0
        self.any_cached = False
        self.requests = 0

    def observe(self, key: int, prompt_tokens: int, cached_tokens: int) -> None:
        self.any_cached = self.any_cached or cached_tokens > 0
        self.requests += 1
        if key in self.sent:
            self.repeated_prompt += prompt_tokens
            self.repeated_cached += min(cached_tokens, prompt_tokens)
            self.sent.move_to_end(key)
            return
        self.sent[key] = None
        if len(self.sent) > KEPT:
            self.sent.popitem(last=False)

    def cache_hit(self) -> float | None:
        """The share of a repeated prompt read from the cache; None while nothing says."""
        if self.repeated_prompt:
            return self.repeated_cached / self.repeated_prompt
        if self.any_cached:
            return 1.0
        return 0.0 if self.requests >= NO_CACHE_AFTER else None
