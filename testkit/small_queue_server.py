"""An OpenAI-compatible model server that accepts few connections at once, as small servers do.

Why this exists: issue 24. Some small self-hosted endpoints and proxies accept few connections
at once: Python's `http.server` keeps an accept queue of 5 (`request_queue_size`) and answers
HTTP/1.0. A burst of new connections larger than what the server holds meets reset
connections (the client sees `ReadError`/`APIConnectionError`) although the server would
serve every one of them a moment later. Whether the kernel resets or silently drops an
overflowing connection on loopback depends on its SYN-cookie state and on
`tcp_abort_on_overflow`, which a test cannot set; so this server does it itself, every time:
a connection that arrives while `max_connections` are already held (its workers plus its
queue) is reset (SO_LINGER 0), as a full accept queue with `tcp_abort_on_overflow=1` does.
The replies are the fault server's (testkit/fault_server.py: its `default_reply`, or
a `reply` function of the request body), after `latency_s`, so that a burst queues.

    with SmallQueueServer(latency_s=0.5, reply=fn) as url:  # http://127.0.0.1:PORT/v1
        ...

`backlog` is the listen queue (default 5, the standard library's); `served` counts chat
replies sent, `reset` the connections turned away. Loopback only.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from testkit.fault_server import default_reply


class SmallQueueServer:
    def __init__(
        self,
        *,
        latency_s: float = 1.0,
        backlog: int = 5,
        max_connections: int | None = 12,
        reply: Callable[[dict], str] = default_reply,
    ):
        self.latency_s, self.reply, self.served, self.reset, self.held = latency_s, reply, 0, 0, 0
        self._lock = threading.Lock()
        outer = self

        class Server(ThreadingHTTPServer):
            request_queue_size = backlog
            daemon_threads = True

            def process_request(self, request, client_address):
                with outer._lock:
                    full = max_connections is not None and outer.held >= max_connections
                    outer.reset += full
                    outer.held += not full
                if full:  # a reset, not a polite close: what an overflowing accept queue sends
                    request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    request.close()
                    return
                super().process_request(request, client_address)

            def shutdown_request(self, request):
                with outer._lock:
                    outer.held -= 1
                super().shutdown_request(request)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(
                    self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}"
                )
                time.sleep(outer.latency_s)
                content = outer.reply(body)
                data = json.dumps(
                    {
                        "id": "chatcmpl-small-queue",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model") or "small-queue-model",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                with outer._lock:
                    outer.served += 1

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> str:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self.url

    def __exit__(self, *exc_info: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
