"""A prompt's tokens before it is sent: the endpoint's own tokenizer, tiktoken, or a stated bound.

See docs/internals/model-calls.md#token-counts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from langchain_core.messages import BaseMessage
from langchain_openai.chat_models.base import _convert_message_to_dict

log = logging.getLogger("parallax.token_count")

CHARS_PER_TOKEN_BOUND = 3
"""The estimate's characters per token (docs/internals/model-calls.md)."""
MESSAGE_OVERHEAD_BOUND = 8
"""The estimate's tokens per message for the chat template's markers (ChatML uses 4 or 5)."""
PROBE_TIMEOUT_S = 10.0
KEEP = 4096
"""Prompt counts kept (most recent first out)."""
OPENAI_HOSTS = ("api.openai.com",)


@dataclass(frozen=True)
class Count:
    """A prompt's tokens and how they were counted (`endpoint`, `tiktoken` or `estimate`)."""

    tokens: int
    method: str

    @property
    def exact(self) -> bool:
        return self.method != "estimate"


def as_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The messages as the request sends them (role and content)."""
    return [_convert_message_to_dict(m) for m in messages]


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def estimate(messages: list[dict[str, Any]], schema: dict[str, Any] | None = None) -> int:
    """The stated bound: characters / 3, rounded up, and MESSAGE_OVERHEAD_BOUND a message."""
    chars = sum(len(_text(m.get("content"))) + len(str(m.get("role", ""))) for m in messages)
    return math.ceil(chars / CHARS_PER_TOKEN_BOUND) + MESSAGE_OVERHEAD_BOUND * len(messages) + 3


def openai_count(
    encoding: Any, messages: list[dict[str, Any]], schema: dict[str, Any] | None = None
) -> int:
    """OpenAI's chat count with a tiktoken `encoding`: 3 per message, 1 per name, 3 priming the
    reply, and the reply schema's compact JSON (a structured-output request's prompt carries it)."""
    total = 3
    for message in messages:
        total += (
            3
            + len(encoding.encode(_text(message.get("content"))))
            + len(encoding.encode(str(message.get("role", ""))))
        )
        if message.get("name"):
            total += 1 + len(encoding.encode(str(message["name"])))
    if schema is not None:
        total += len(encoding.encode(json.dumps(schema, separators=(",", ":"))))
    return total


def server_root(base_url: str) -> str:
    """The server's root (`http://host:port`) for an OpenAI-compatible base URL (`.../v1`)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class Counter:
    """The prompt counter of one endpoint and model; `count` is safe to call concurrently."""

    def __init__(self, base_url: str, model: str, api_key: str = "") -> None:
        self.base_url, self.model, self.api_key = base_url, model, api_key
        self.method: str | None = None
        self._encoding: Any = None
        self._probe: asyncio.Lock | None = None
        self._kept: OrderedDict[str, int] = OrderedDict()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def _vllm(self, client: httpx.AsyncClient, messages: list[dict[str, Any]]) -> int | None:
        reply = await client.post(
            f"{server_root(self.base_url)}/tokenize",
            headers=self._headers(),
            json={"model": self.model, "messages": messages, "add_generation_prompt": True},
        )
        if reply.status_code != 200:
            return None
        body = reply.json()
        return (
            int(body["count"])
            if isinstance(body, dict) and isinstance(body.get("count"), int)
            else None
        )

    async def _llama_cpp(
        self, client: httpx.AsyncClient, messages: list[dict[str, Any]]
    ) -> int | None:
        root = server_root(self.base_url)
        templated = await client.post(
            f"{root}/apply-template", headers=self._headers(), json={"messages": messages}
        )
        if templated.status_code != 200 or not isinstance(
            prompt := templated.json().get("prompt"), str
        ):
            return None
        tokens = await client.post(
            f"{root}/tokenize",
            headers=self._headers(),
            json={"content": prompt, "add_special": True},
        )
        if tokens.status_code != 200 or not isinstance(found := tokens.json().get("tokens"), list):
            return None
        return len(found)

    async def _by_endpoint(self, messages: list[dict[str, Any]]) -> int | None:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S, trust_env=False) as client:
            if self.method in (None, "endpoint:vllm"):
                found = await self._vllm(client, messages)
                if found is not None:
                    self.method = "endpoint:vllm"
                    return found
            if self.method in (None, "endpoint:llama.cpp"):
                found = await self._llama_cpp(client, messages)
                if found is not None:
                    self.method = "endpoint:llama.cpp"
                    return found
        return None

    async def _load_tiktoken(self) -> Any:
        if urlsplit(self.base_url).hostname not in OPENAI_HOSTS:
            return None
        try:
            import tiktoken

            return await asyncio.wait_for(
                asyncio.to_thread(tiktoken.encoding_for_model, self.model), PROBE_TIMEOUT_S
            )
        except Exception as exc:  # noqa: BLE001 - an unknown model, or its encoding not reachable: the estimate
            log.warning(
                "no tiktoken encoding for %s (%s): prompts are estimated at %s characters a token",
                self.model,
                type(exc).__name__,
                CHARS_PER_TOKEN_BOUND,
            )
            return None

    async def _decide(self, messages: list[dict[str, Any]]) -> int | None:
        """The first count, which also decides the method."""
        self._encoding = await self._load_tiktoken()
        if self._encoding is not None:
            self.method = "tiktoken"
            return None
        try:
            found = await self._by_endpoint(messages)
        except (httpx.HTTPError, ValueError):
            found = None
        if found is None:
            self.method = "estimate"
        return found

    async def count(
        self, messages: Sequence[BaseMessage], schema: dict[str, Any] | None = None
    ) -> Count:
        """The prompt's tokens. `schema`: the reply's JSON schema when the request sends it as a
        structured-output `response_format` (OpenAI adds it to the prompt)."""
        sent = as_dicts(messages)
        key = hashlib.sha256(
            json.dumps([sent, schema], sort_keys=True, default=str).encode()
        ).hexdigest()
        if (kept := self._kept.get(key)) is not None:
            self._kept.move_to_end(key)
            return Count(kept, self.method or "estimate")
        found: int | None = None
        if self.method is None:
            self._probe = self._probe or asyncio.Lock()
            async with self._probe:
                if self.method is None:
                    found = await self._decide(sent)
        if found is None:
            if self.method == "tiktoken":
                found = openai_count(self._encoding, sent, schema)
            elif self.method is not None and self.method.startswith("endpoint"):
                try:
                    found = await self._by_endpoint(sent)
                except (httpx.HTTPError, ValueError):
                    found = None
            if found is None:
                return Count(estimate(sent, schema), "estimate")
        self._kept[key] = found
        if len(self._kept) > KEEP:
            self._kept.popitem(last=False)
        return Count(found, self.method or "estimate")
