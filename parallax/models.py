"""The one place that builds chat models.

Every model call in Parallax goes through `langchain_openai.ChatOpenAI`, so any
OpenAI-compatible endpoint works. With no endpoint configured the embedded llama.cpp
server is found or started (see `parallax.local_model`); that is blocking work, so it
runs in a thread and only once per process.
"""

from __future__ import annotations

import asyncio

from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI

from parallax import settings as settings_mod

_base_url: str | None = None


async def resolve_base_url() -> str:
    """The endpoint URL; starts the embedded model server on first use if needed.

    `local_model.resolve_base_url` is thread-safe and starts at most one server, so
    concurrent first calls may both go to the thread without harm.
    """
    global _base_url
    if _base_url is None:
        from parallax.local_model import resolve_base_url as resolve

        _base_url = await asyncio.to_thread(resolve, settings_mod.load())
    return _base_url


async def chat_model(*, model: str, temperature: float, timeout_s: float, max_tokens: int) -> BaseChatModel:
    """A chat model for one branch. Retries are ours (see `parallax.structured`), not the client's."""
    current = settings_mod.load()
    return ChatOpenAI(
        model=model or current.model,
        temperature=temperature,
        base_url=await resolve_base_url(),
        api_key=current.api_key,
        timeout=timeout_s,
        max_retries=0,
        max_tokens=max_tokens,
    )
