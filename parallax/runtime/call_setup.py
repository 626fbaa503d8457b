"""What a branch's model call is set up with: limits, endpoint, response format, tracing."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from parallax.runtime import chat_models
from parallax.runtime import settings as settings_mod
from parallax.runtime.circuit_breaker import CircuitBreaker
from parallax.runtime.endpoint_seen import prompt_key
from parallax.runtime.prices import Price, price_of, price_table
from parallax.runtime.services import Services, process_services
from parallax.runtime.settings import Settings
from parallax.state.context import ChatModelFactory


@dataclass(frozen=True)
class CallLimits:
    """How one branch's call may go: the model it asks (empty: the endpoint's usual one), its
    temperature, the seconds per attempt, the attempts per reply, the re-asks for an invalid
    reply and the reply's token cap."""

    model: str
    temperature: float
    timeout_s: float
    max_attempts: int
    max_reasks: int
    max_tokens: int


@functools.lru_cache(maxsize=64)
def response_format(schema: type[BaseModel], kind: str) -> dict[str, Any] | None:
    """The `response_format` an endpoint of this `kind` understands (PARALLAX_RESPONSE_FORMAT)."""
    json_schema = schema.model_json_schema()
    if kind == "json_object_schema":  # llama.cpp server
        return {"type": "json_object", "schema": json_schema}
    if kind == "json_schema":  # OpenAI, vLLM, Ollama
        return {
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": json_schema},
        }
    if kind == "json_object":
        return {"type": "json_object"}
    return None


@dataclass(frozen=True)
class CallFormat:
    """The arguments every request of a call sends: its temperature, the response format, the reply
    cap.

    `schema`: the JSON Schema sent as a `json_schema` response format (a budget counts it with
    the prompt)."""

    kind: str
    kwargs: dict[str, Any]
    schema: dict[str, Any] | None
    max_tokens: int

    def capped(self, cap: int) -> dict[str, Any]:
        """The arguments with the reply cap lowered to `cap` (a budget's shrink); as they are at
        the full cap."""
        if cap == self.max_tokens:
            return self.kwargs
        lowered: dict[str, Any] = {**self.kwargs, "max_completion_tokens": cap}
        if self.kind == "json_object_schema":
            lowered["extra_body"] = {**self.kwargs.get("extra_body", {}), "max_tokens": cap}
        return lowered


def call_format(
    schema: type[BaseModel], kind: str, temperature: float, max_tokens: int
) -> CallFormat:
    """The arguments of a call asking for `schema` from an endpoint whose response format is of
    `kind`."""
    kwargs: dict[str, Any] = {"temperature": temperature}
    fmt = response_format(schema, kind)
    if fmt is not None:
        kwargs["response_format"] = fmt
    sent_schema = (
        fmt["json_schema"]["schema"] if fmt is not None and kind == "json_schema" else None
    )
    if kind == "json_object_schema":  # llama.cpp ignores ChatOpenAI's max_completion_tokens
        kwargs["extra_body"] = {"max_tokens": max_tokens}
    return CallFormat(kind, kwargs, sent_schema, max_tokens)


def trace_config(metadata: dict[str, Any] | None, tracing: bool) -> RunnableConfig | None:
    """The branch's metadata for LangSmith; None without tracing: nobody reads it, and building a
    callback configuration per call costs more than the rest of a fan-out branch."""
    if not tracing:
        return None
    kind = str((metadata or {}).get("kind", "call"))
    return {
        "metadata": dict(metadata or {}),
        "tags": ["parallax", kind],
        "run_name": f"parallax {kind}",
    }


@dataclass(frozen=True)
class Endpoint:
    """The chat model a call asks, and what the process keeps for its endpoint: breaker, price,
    cache readings.

    `base_url`: the OpenAI-compatible endpoint's URL (None: a chat model handed in without one);
    `name`: the URL, else the chat model's class name (what a breaker and an error name)."""

    llm: Any
    base_url: str | None
    name: str
    model_name: str
    services: Services
    breaker: CircuitBreaker
    price: Price | None
    settings: Settings

    @property
    def wave_key(self) -> tuple[str, str]:
        """Under which a wave remembers whether the endpoint takes `n` (runtime/wave_request.py)."""
        return str(self.base_url), str(getattr(self.llm, "model_name", ""))

    def observe(self, conversation: list[BaseMessage], spent: dict[str, int]) -> None:
        """What the endpoint served from its cache, for a prompt it may have read before
        (runtime/endpoint_seen.py)."""
        self.services.seen[(str(self.base_url), self.model_name)].observe(
            prompt_key(conversation), spent["prompt"], spent["cached_tokens"]
        )


async def open_endpoint(
    limits: CallLimits, chat_model: ChatModelFactory | None, services: Services | None
) -> Endpoint:
    """The chat model built for `limits` (by `chat_model`, else ChatOpenAI on the configured
    endpoint) and its endpoint's breaker in `services` (default the process's)."""
    llm = await (chat_model or chat_models.chat_model)(
        model=limits.model, timeout_s=limits.timeout_s, max_tokens=limits.max_tokens
    )
    current = settings_mod.load()
    base_url = getattr(llm, "openai_api_base", None)
    name = str(base_url or type(llm).__name__)
    services = services or process_services()
    model_name = str(getattr(llm, "model_name", "") or limits.model or current.chat_model_name)
    return Endpoint(
        llm,
        base_url,
        name,
        model_name,
        services,
        services.breaker_for(name),
        price_of(price_table(current), model_name),
        current,
    )
