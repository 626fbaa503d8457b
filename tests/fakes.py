"""A scripted chat model for offline unit tests (never used by the product path)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

Reply = str | BaseException | tuple[float, str]


class ScriptedChatModel(BaseChatModel):
    """Answers each call with `script(prompt_text, temperature, call_index)`.

    The script returns text, an exception to raise, or (delay_seconds, text).
    Every call is logged in `calls` as (prompt_text, temperature).
    """

    script: Callable[[str, float, int], Reply]
    temperature: float = 0.0
    calls: Any = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("use the async API")

    async def _agenerate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        index = len(self.calls)
        self.calls.append((prompt, self.temperature))
        temperature = kwargs.get("temperature", self.temperature)
        reply = self.script(prompt, temperature, index)
        if isinstance(reply, tuple):
            await asyncio.sleep(reply[0])
            reply = reply[1]
        if isinstance(reply, BaseException):
            raise reply
        words = len(prompt.split())
        usage = {"input_tokens": words, "output_tokens": len(reply.split()), "total_tokens": words + len(reply.split())}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply, usage_metadata=usage))])


def install(monkeypatch, script: Callable[[str, float, int], Reply]) -> list:
    """Route every model call of the product code to `script`; returns the shared call log."""
    from parallax import models

    calls: list = []

    async def factory(*, model: str, timeout_s: float, max_tokens: int):
        return ScriptedChatModel(script=script, calls=calls)

    monkeypatch.setattr(models, "chat_model", factory)
    return calls
