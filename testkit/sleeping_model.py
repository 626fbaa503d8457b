"""Chat models for benchmarks: no network, no weights, fixed cost per call.

Why: to measure what Parallax's graph adds on top of model latency, the model must cost
exactly `latency_s` and nothing else. `sleeping()` makes a factory for `Context.chat_model`,
so the real graph, nodes and `parallax.runtime.structured_call.ask` run unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from parallax.state.context import ChatModelFactory

VOTE_REPLY = '{"reasoning":"r","answer":"42"}'


def prompt_text(messages: list[BaseMessage]) -> str:
    """The full text of a call, as the benchmarks count it."""
    return "\n".join(str(m.content) for m in messages)


class SleepingChatModel(BaseChatModel):
    """Sleeps `latency_s` (or `latency_for(prompt)`), then answers `reply` (or `reply_for(prompt)`);
    `on_call(messages)` sees every prompt."""

    latency_s: float = 0.0
    latency_for: Callable[[str], float] | None = None
    reply: str = VOTE_REPLY
    reply_for: Callable[[str], str] | None = None
    temperature: float = 0.0
    on_call: Callable[[list[BaseMessage]], None] | None = None

    @property
    def _llm_type(self) -> str:
        return "sleeping"

    def _generate(
        self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs: Any
    ) -> ChatResult:
        raise NotImplementedError("benchmarks use the async API")

    async def _agenerate(
        self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs: Any
    ) -> ChatResult:
        if self.on_call is not None:
            self.on_call(messages)
        latency = self.latency_for(prompt_text(messages)) if self.latency_for else self.latency_s
        if latency > 0:
            await asyncio.sleep(latency)
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        reply = self.reply_for(prompt_text(messages)) if self.reply_for else self.reply
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=reply, usage_metadata=usage))]
        )


def sleeping(**fields: Any) -> ChatModelFactory:
    """A chat model factory (for `Context.chat_model`) whose every call goes to one shared
    `SleepingChatModel(**fields)`: shared, like the product's cached ChatOpenAI; temperature
    arrives per call."""
    shared = SleepingChatModel(**fields)

    async def factory(*, model: str, timeout_s: float, max_tokens: int) -> BaseChatModel:
        return shared

    return factory
