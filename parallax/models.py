"""The one place that builds chat models.

Every model call in Parallax goes through `langchain_openai.ChatOpenAI`, so any
OpenAI-compatible endpoint works. With no endpoint configured the embedded llama.cpp
server is found or started (see `parallax.local_model`); that is blocking work, so it
runs in a thread and only once per process.
"""

from __future__ import annotations

import asyncio
import weakref

import openai
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI

from parallax import settings as settings_mod

_base_url: str | None = None


async def resolve_base_url(current: settings_mod.Settings | None = None) -> str:
    """The endpoint URL: OPENAI_BASE_URL if set, else the embedded server (started once).

    `local_model.resolve_base_url` is thread-safe and starts at most one server, so
    concurrent first calls may both go to the thread without harm.
    """
    global _base_url
    current = current or settings_mod.load()
    if current.base_url:
        return current.base_url
    if _base_url is None:
        from parallax.local_model import resolve_base_url as resolve

        _base_url = await asyncio.to_thread(resolve, current)
    return _base_url


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, BaseChatModel]] = weakref.WeakKeyDictionary()


async def chat_model(*, model: str, timeout_s: float, max_tokens: int) -> BaseChatModel:
    """A shared chat model; callers pass `temperature` (and `response_format`) per call.

    Building a ChatOpenAI costs about half a millisecond, so one instance per model and
    event loop serves every branch. Each loop gets its own HTTP client: langchain-openai
    would otherwise share one process-wide pool, which breaks on the second event loop
    (tests, benchmarks, servers with isolated loops). Retries are ours (see
    `parallax.structured`), not the client's.
    """
    current = settings_mod.load()
    base_url = await resolve_base_url(current)
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    key = (model or current.model, base_url, current.api_key, timeout_s, max_tokens)
    client = per_loop.get(key)
    if client is None:
        client = per_loop[key] = ChatOpenAI(
            model=key[0], base_url=base_url, api_key=current.api_key, timeout=timeout_s, max_retries=0,
            max_tokens=max_tokens, http_async_client=openai.DefaultAsyncHttpxClient(timeout=timeout_s),
        )
    return client
