"""An OpenAI-compatible chat server that bills and caches as real endpoints do, for tests and
bench/cost.py.

Why: what a run costs depends on how the endpoint bills, and Parallax cannot see the bill. This
server keeps one, as documented by OpenAI and vLLM:

- prompt tokens are billed per request, once, whatever `n` is: the `n` choices of a request share
  one prompt (OpenAI: "you will be charged based on the number of generated tokens across all of the
  choices", prompt tokens once);
- a prefix sent before is read from the cache and billed at `cached_rate` of the input price
  (`usage.prompt_tokens_details.cached_tokens`); OpenAI's rate is 0.1 to 0.5 by model, 0.1 for its
  current models;
- the cache works as vLLM's automatic prefix caching: the prompt is cut into blocks of
  `block_tokens` (vLLM's default 16) and a block is a hit when the same block, after the same blocks
  before it, is in the cache; only whole leading blocks hit. When a request's blocks enter the cache
  is `cache_timing`:
  - "scheduled" (the default; vLLM v1): when the request is scheduled, before its prompt is read.
    vLLM's design notes (docs/design/prefix_caching.md, "Block Allocation"): "If an allocated block
    is already full of tokens, we immediately add it to the cache block, so that the block can be
    reused by other requests in the same batch" (`KVCacheManager.allocate_slots` caches up to the
    tokens scheduled in the step). So of several identical requests sent at once, the first one
    the server takes reads the prompt and the others hit.
  - "read": once the request's prompt has been read. A request sent while an identical one is still
    being read misses. This is what hosted APIs do in practice (Anthropic documents it: a cache
    entry is available once the first response begins; parallel requests should wait for it), and
    what vLLM v0 did.

Tokens are words (whitespace-separated), counted over each message as `role: content`, so a test
knows what to expect. Latency: `base_ms` + `prefill_ms_per_token` per uncached prompt token +
`decode_ms_per_token` per completion token of the longest choice (choices of one request decode
side by side, as a batching server does).

`n_support`: "yes" (as OpenAI and vLLM), "refuse" (HTTP 400 for n > 1) or "ignore" (one choice, as
llama-cpp-python's server). A reply is cut at the request's `max_completion_tokens` (or
`max_tokens`) words, `finish_reason` "length", as every endpoint does. `tokenize` (on by default):
`POST /tokenize` counts a request's prompt as vLLM's does (`{"model", "messages"}` -> `{"count"}`),
so Parallax knows this server's tokenizer (runtime/token_count.py); off, it answers 404 and Parallax
estimates. Each logged request carries its `tag`: the last `[run NAME]` in its prompt (a bench names
its runs so), to bill runs apart. Replies come from `reply(body, k)`, k the choice's place among all
choices this server gave for the same messages (so the k-th vote of a question gets the k-th answer,
asked singly or with `n`). The bill and a log of requests are read with `bill()` and `log()`.

    with BillingServer(reply=lambda body, k: '{"answer": "42"}') as base_url:  #
    http://127.0.0.1:PORT/v1
        ...
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from parallax.runtime.model_server import wait_for_200

Reply = Callable[[dict[str, Any], int], str | dict[str, str]]
"""The content of choice k, or {"content", "finish_reason"} (e.g. "length": a reply cut at the token
limit)."""


@dataclass
class Pricing:
    """How the server bills and how fast it reads and writes."""

    cached_rate: float = 0.1
    block_tokens: int = 16
    base_ms: float = 50.0
    prefill_ms_per_token: float = 0.02
    decode_ms_per_token: float = 2.0
    n_support: str = "yes"
    cache_timing: str = "scheduled"
    """When a request's blocks enter the cache: "scheduled" (vLLM v1) or "read" (see the module
    docstring)."""
    tokenize: bool = True
    """Serve `POST /tokenize` (vLLM's form): the prompt's count before it is sent."""
    prefix_cache: bool = True
    """Keep a prefix cache at all (False: every prompt token is read and billed in full)."""
    usage_of: str = "request"
    """What the usage's completion tokens count: "request" (all choices, as OpenAI and vLLM) or
    "first_choice" (as llama.cpp's server does with `n`, naming its build as the
    system_fingerprint)."""


@dataclass
class Bill:
    """What the server billed since its last reset."""

    cached_rate: float = 0.1
    requests: int = 0
    refused: int = 0
    choices: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0

    @property
    def billed_input(self) -> float:
        """Input tokens at full price: uncached prompt tokens plus cached ones at the cached
        rate."""
        return self.prompt_tokens - self.cached_tokens + self.cached_tokens * self.cached_rate

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "refused": self.refused,
            "choices": self.choices,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "completion_tokens": self.completion_tokens,
            "billed_input_tokens": round(self.billed_input, 1),
        }


TAG = re.compile(r"\[run ([^\]]+)\]")


def tag_of(body: dict[str, Any]) -> str:
    """The last `[run NAME]` in the request's messages, the newest text's ("" when none): a chat's
    rewrite quotes the earlier turns before the follow-up it is for."""
    found = [
        m.group(1)
        for message in body.get("messages", [])
        for m in TAG.finditer(str(message.get("content", "")))
    ]
    return found[-1] if found else ""


def cap_of(body: dict[str, Any]) -> int | None:
    """The request's reply cap: `max_completion_tokens`, else `max_tokens` (None: none)."""
    for name in ("max_completion_tokens", "max_tokens"):
        if isinstance(body.get(name), int):
            return int(body[name])
    return None


def words(body: dict[str, Any]) -> list[str]:
    """The prompt's tokens: the words of each message as `role: content`."""
    return [
        w
        for m in body.get("messages", [])
        for w in f"{m.get('role', '')}: {m.get('content', '')}".split()
    ]


@dataclass
class BillingState:
    reply: Reply
    pricing: Pricing
    bill: Bill = field(default_factory=Bill)
    cached_blocks: set[str] = field(default_factory=set)
    given: dict[str, int] = field(default_factory=dict)
    entries: list[dict[str, Any]] = field(default_factory=list)
    arrivals: int = 0
    tokenized: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def block_keys(self, tokens: list[str]) -> list[str]:
        """One key per whole block: a hash of every token up to the block's end (a block's place
        matters)."""
        size, keys, running = self.pricing.block_tokens, [], hashlib.sha256()
        for end in range(size, len(tokens) + 1, size):
            running.update(" ".join(tokens[end - size : end]).encode() + b"\x00")
            keys.append(running.copy().hexdigest())
        return keys


async def chat(request: Request) -> JSONResponse:
    state: BillingState = request.app.state.billing
    body = await request.json()
    n = int(body.get("n") or 1)
    pricing = state.pricing
    arrived = time.time()
    with state.lock:
        state.arrivals += 1
    if n > 1 and pricing.n_support == "refuse":
        with state.lock:
            state.bill.refused += 1
        return JSONResponse(
            {
                "error": {
                    "message": "n > 1 is not supported",
                    "type": "invalid_request_error",
                    "param": "n",
                    "code": None,
                }
            },
            status_code=400,
        )
    given = 1 if pricing.n_support == "ignore" else n
    tokens = words(body)
    keys = state.block_keys(tokens)
    with state.lock:
        hits = 0
        for key in keys if pricing.prefix_cache else ():
            if key not in state.cached_blocks:
                break
            hits += 1
        if pricing.cache_timing == "scheduled":
            state.cached_blocks.update(
                keys
            )  # vLLM v1: cached when allocated, for requests of the same batch too
    cached = min(hits * pricing.block_tokens, max(len(tokens) - 1, 0))
    await asyncio.sleep(
        (pricing.base_ms + pricing.prefill_ms_per_token * (len(tokens) - cached)) / 1000
    )
    digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()
    with state.lock:
        state.cached_blocks.update(
            keys
        )  # the prompt has been read: its blocks are cached from now on (both timings)
        first = state.given.get(digest, 0)
        state.given[digest] = first + given
    replies = [state.reply(body, first + k) for k in range(given)]
    contents = [r["content"] if isinstance(r, dict) else r for r in replies]
    finish = [r.get("finish_reason", "stop") if isinstance(r, dict) else "stop" for r in replies]
    cap = cap_of(body)
    if cap is not None:  # a reply stops at the cap, as on every endpoint
        for k, content in enumerate(contents):
            if len(content.split()) > cap:
                contents[k], finish[k] = " ".join(content.split()[:cap]), "length"
    completion = [len(c.split()) for c in contents]
    await asyncio.sleep(pricing.decode_ms_per_token * max(completion) / 1000)
    with state.lock:
        bill = state.bill
        bill.requests += 1
        bill.choices += given
        bill.prompt_tokens += len(tokens)
        bill.cached_tokens += cached
        bill.completion_tokens += sum(completion)
        state.entries.append(
            {
                "n": n,
                "choices": given,
                "prompt_tokens": len(tokens),
                "cached_tokens": cached,
                "completion_tokens": sum(completion),
                "max_tokens": cap,
                "tag": tag_of(body),
                "arrived": arrived,
                "done": time.time(),
                "temperature": body.get("temperature"),
                "messages_hash": digest,
                "schema": (
                    ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
                ),
            }
        )
    reported = completion[0] if pricing.usage_of == "first_choice" else sum(completion)
    usage = {
        "prompt_tokens": len(tokens),
        "completion_tokens": reported,
        "total_tokens": len(tokens) + reported,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return JSONResponse(
        {
            "id": f"chatcmpl-{digest[:12]}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "system_fingerprint": "b4500-1a2b3c4" if pricing.usage_of == "first_choice" else None,
            "choices": [
                {
                    "index": k,
                    "message": {"role": "assistant", "content": c},
                    "finish_reason": finish[k],
                }
                for k, c in enumerate(contents)
            ],
            "usage": usage,
        }
    )


async def tokenize(request: Request) -> JSONResponse:
    """vLLM's `POST /tokenize` for chat messages: the prompt's tokens as this server bills them."""
    state: BillingState = request.app.state.billing
    if not state.pricing.tokenize:
        return JSONResponse({"detail": "Not Found"}, status_code=404)
    body = await request.json()
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return JSONResponse(
            {"error": {"message": "messages required", "type": "invalid_request_error"}},
            status_code=400,
        )
    count = len(words(body))
    with state.lock:
        state.tokenized += 1
    return JSONResponse({"count": count, "max_model_len": 131072, "tokens": list(range(count))})


async def models(request: Request) -> JSONResponse:
    return JSONResponse({"object": "list", "data": [{"id": "scripted", "object": "model"}]})


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


class BillingServer:
    """The billing server in a background thread on a free loopback port; `with` yields its /v1
    URL."""

    def __init__(self, reply: Reply, pricing: Pricing | None = None) -> None:
        pricing = pricing or Pricing()
        self.state = BillingState(reply, pricing, Bill(cached_rate=pricing.cached_rate))
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/tokenize", tokenize, methods=["POST"]),
                Route("/v1/models", models),
                Route("/health", health),
            ]
        )
        self.app.state.billing = self.state
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def bill(self) -> Bill:
        return self.state.bill

    def log(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return list(self.state.entries)

    def arrivals(self) -> int:
        """Chat requests received so far, finished or not."""
        with self.state.lock:
            return self.state.arrivals

    def reset(self, pricing: Pricing | None = None) -> None:
        """A fresh bill, log, cache and answer count (and, given, new pricing)."""
        with self.state.lock:
            if pricing is not None:
                self.state.pricing = pricing
            self.state.bill = Bill(cached_rate=self.state.pricing.cached_rate)
            self.state.cached_blocks.clear()
            self.state.given.clear()
            self.state.entries.clear()
            self.state.arrivals = 0
            self.state.tokenized = 0

    def start(self) -> str:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(
            uvicorn.Config(self.app, log_level="warning", lifespan="off", access_log=False)
        )
        server = self._server
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])),
            daemon=True,
            name=f"billing-server-{self.port}",
        )
        self._thread.start()
        if wait_for_200(f"http://127.0.0.1:{self.port}/health", 10.0, interval_s=0.02) != "ready":
            raise RuntimeError("billing server did not start")
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
