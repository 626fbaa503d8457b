"""A slow, streaming OpenAI-compatible chat stub for Aegra's sample graphs (bench/peer_suites.py
only).

Why not testkit/fault_server.py: Aegra's sample agent streams its model (stream=True,
which the fault server refuses) and its cancel tests need a run that is still going a second
after it starts. This answers every chat request with the same sentence, word by word, one word
every `word_s` seconds (as SSE chunks when asked to stream), and never calls a tool.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

REPLY = " ".join(f"word{i}" for i in range(1, 41))


def make_app(word_s: float) -> Starlette:
    async def models(_request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "peer-model", "object": "model"}]})

    async def chat(request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        model, created = body.get("model", "peer-model"), int(time.time())
        words = REPLY.split(" ")
        if not body.get("stream"):
            await asyncio.sleep(word_s * len(words))
            return JSONResponse(
                {
                    "id": "chatcmpl-peer",
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": REPLY},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": 1,
                        "completion_tokens": len(words),
                        "total_tokens": 1 + len(words),
                    },
                }
            )

        async def chunks() -> AsyncIterator[str]:
            for i, word in enumerate(words):
                await asyncio.sleep(word_s)
                delta = {"role": "assistant", "content": word if i == 0 else " " + word}
                yield (
                    "data: "
                    + json.dumps(
                        {
                            "id": "chatcmpl-peer",
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": model,
                            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                        }
                    )
                    + "\n\n"
                )
            yield (
                "data: "
                + json.dumps(
                    {
                        "id": "chatcmpl-peer",
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    }
                )
                + "\n\n"
            )
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return Starlette(
        routes=[Route("/v1/models", models), Route("/v1/chat/completions", chat, methods=["POST"])]
    )


def start(port: int, word_s: float = 0.05) -> uvicorn.Server:
    """Serve on 127.0.0.1:`port` from a daemon thread; returns once it accepts connections."""
    server = uvicorn.Server(
        uvicorn.Config(make_app(word_s), host="127.0.0.1", port=port, log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server
