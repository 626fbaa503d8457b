"""A scripted chat model for offline unit tests (never used by the product path).

The product takes it through `Context.chat_model`; nothing is patched. A script that must tell kinds
of call apart asks `asked_for()`, the name of the schema the call asks for (Answer, Reflection,
Curation, ...), rather than matching the prompt's wording, which a prompt edit changes."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from parallax.state.context import Context

Reply = str | BaseException | tuple[float, str]
_ASKED: contextvars.ContextVar[str] = contextvars.ContextVar("scripted_schema", default="")


def asked_for() -> str:
    """Inside a script: the name of the pydantic schema the current call asks for ("" when it asks
    for none)."""
    return _ASKED.get()


def schema_name(response_format: Any) -> str:
    """The schema's name in a `response_format` of any kind Parallax sends
    (runtime/structured_call.py)."""
    if not isinstance(response_format, dict):
        return ""
    named = response_format.get("json_schema") or {}
    return str(named.get("name") or (response_format.get("schema") or {}).get("title") or "")


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

    def _generate(
        self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs: Any
    ) -> ChatResult:
        raise NotImplementedError("use the async API")

    async def _agenerate(
        self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs: Any
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        index = len(self.calls)
        self.calls.append((prompt, self.temperature))
        temperature = kwargs.get("temperature", self.temperature)
        token = _ASKED.set(schema_name(kwargs.get("response_format")))
        try:
            reply = self.script(prompt, temperature, index)
        finally:
            _ASKED.reset(token)
        if isinstance(reply, tuple):
            await asyncio.sleep(reply[0])
            reply = reply[1]
        if isinstance(reply, BaseException):
            raise reply
        words = len(prompt.split())
        usage = {
            "input_tokens": words,
            "output_tokens": len(reply.split()),
            "total_tokens": words + len(reply.split()),
        }
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=reply, usage_metadata=usage))]
        )


def scripted(
    script: Callable[[str, float, int], Reply], **context_fields: Any
) -> tuple[Context, list]:
    """A run Context whose every model call goes to `script`, and the shared call log.

    `context_fields` set other Context fields (e.g. `straggler_factor=3.0`, `embedder=...`). Votes
    are asked all at once (`early_stop=False`) unless a test passes `early_stop=True`: most tests
    script the n-th call's reply and count calls, which an adaptive vote would change; tests of
    adaptive votes ask for them. Pass the Context to a graph (`context=`) or to the CLI
    (`runner.invoke(app, args, obj=ctx)`).
    """
    calls: list = []

    async def factory(*, model: str, timeout_s: float, max_tokens: int):
        return ScriptedChatModel(script=script, calls=calls)

    return Context(chat_model=factory, **{"early_stop": False, **context_fields}), calls
