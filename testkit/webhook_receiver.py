"""A webhook receiver for the deploy tests: a loopback HTTP server that records every POST it gets.

How it answers is scripted: `answers` is consumed one entry per request (an HTTP status; "hang":
keep the request open, answering nothing, until `release()` or `stop()`; "drip": answer 200 with a
body it sends one byte every 0.1 s until released, which no per-read timeout ever ends; "flood":
answer 200 with a 64 MB body, as fast as the client reads it), and `default` answers the rest. Each
request is recorded as it arrives (`received`, oldest first) with its headers and raw body, so a
test can check the signature over the exact bytes sent; `Received.sent` is how many body bytes of a
"drip" or "flood" answer got out before the client closed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FLOOD_BYTES = 64 * 1024 * 1024


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    time: float
    answered: int | str | None = None
    sent: int = 0


@dataclass
class WebhookReceiver:
    answers: list[int | str] = field(default_factory=list)
    default: int = 200
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                entry = Received(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time()
                )
                with receiver._lock:
                    receiver.received.append(entry)
                    answer = receiver.answers.pop(0) if receiver.answers else receiver.default
                entry.answered = answer
                if answer == "hang":
                    receiver._release.wait(60)
                    self.close_connection = True
                    return
                if answer in ("drip", "flood"):
                    self.close_connection = True
                    self.send_response(200)
                    self.send_header("content-length", str(FLOOD_BYTES))
                    self.end_headers()
                    chunk = b"x" if answer == "drip" else b"x" * 65_536
                    try:
                        while entry.sent < FLOOD_BYTES and not receiver._release.is_set():
                            self.wfile.write(chunk)
                            self.wfile.flush()
                            entry.sent += len(chunk)
                            if answer == "drip":
                                receiver._release.wait(0.1)
                    except OSError:  # the client closed: what it read is what was sent
                        pass
                    return
                self.send_response(int(answer))
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def release(self) -> None:
        """Let hanging requests go (they end without an answer)."""
        self._release.set()

    def wait_for(self, count: int, timeout_s: float = 20.0) -> list[Received]:
        """The first `count` requests, once they have arrived (AssertionError after `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    return list(self.received[:count])
            time.sleep(0.05)
        raise AssertionError(
            f"webhook receiver got {len(self.received)} requests in {timeout_s:g}s, expected"
            f" {count}"
        )

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
