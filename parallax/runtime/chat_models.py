"""The one place that builds chat models: shared `ChatOpenAI`s that never stream.

See docs/internals/model-calls.md#chat-models.
"""

from __future__ import annotations

import asyncio
import weakref

import openai
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI

from parallax.runtime import model_server
from parallax.runtime import settings as settings_mod
from parallax.runtime.endpoint_limits import connection_limits


async def endpoint(current: settings_mod.Settings) -> str:
    """OPENAI_BASE_URL if set, else the embedded server's URL (found or started once per
    process)."""
    if current.base_url:
        return current.base_url
    known = model_server.known_endpoint()
    if known:
        return known
    return await asyncio.to_thread(model_server.endpoint, current)


_ModelKey = tuple[str, str, str, float, int]  # (model, base_url, api_key, timeout_s, max_tokens)
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_ModelKey, BaseChatModel]] = (
    weakref.WeakKeyDictionary()
)
_http: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[str, openai.DefaultAsyncHttpxClient]
] = weakref.WeakKeyDictionary()


def http_client(base_url: str) -> openai.DefaultAsyncHttpxClient:
    """The one HTTP client (and connection pool) of an endpoint on this loop, capped at
    PARALLAX_ENDPOINT_MAX_CONNECTIONS (runtime/endpoint_limits.py); each call passes its own
    timeout.
    """
    per_loop = _http.setdefault(asyncio.get_running_loop(), {})
    client = per_loop.get(base_url)
    if client is None:
        # openai's client is typed against httpx2's Limits; its pool takes httpx's Limits as they
        # are
        client = per_loop[base_url] = openai.DefaultAsyncHttpxClient(limits=connection_limits())  # type: ignore[arg-type]
    return client


async def chat_model(*, model: str, timeout_s: float, max_tokens: int) -> BaseChatModel:
    """A shared chat model; callers pass `temperature` (and `response_format`) per call.

    One instance per model and event loop serves every branch. Each loop has its own HTTP client
    (langchain-openai's process-wide pool breaks on a second loop), shared by every chat model of
    the endpoint, so its connection cap holds. Retries are runtime/retry.py's, not the client's.
    """
    current = settings_mod.load()
    base_url = await endpoint(current)
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    key = (model or current.chat_model_name, base_url, current.api_key, timeout_s, max_tokens)
    client = per_loop.get(key)
    if client is None:
        client = per_loop[key] = ChatOpenAI(
            model=key[0],
            base_url=base_url,
            api_key=current.api_key,
            timeout=timeout_s,
            max_retries=0,
            max_tokens=max_tokens,
            http_async_client=http_client(base_url),
            disable_streaming=True,
        )
    return client


def forget_clients() -> None:
    """Drop every cached client (tests that point the process at another endpoint)."""
    _clients.clear()
    _http.clear()
