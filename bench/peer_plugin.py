"""pytest plugin for running a peer project's own suite against `parallax serve`
(bench/peer_suites.py loads it).

What the peer suites assume and `parallax serve` does not give them, set from the environment
bench/peer_suites.py prepares, without editing a line of their files:
- every request carries an API key (the served API has no anonymous access): every httpx client
  made in the test process gets `x-api-key: $PARALLAX_PEER_KEY` unless it sets one itself, and so
  does the SDK's WebSocket handshake (which sends only the stream's own `headers=`, never the
  client's: against any server with keys a caller passes the key there); `get_client()` and
  `RemoteGraph` read LANGGRAPH_API_KEY (set by the runner);
- a test that hangs (the suites set no time limit; one of langgraph-sdk's cancel tests never ends
  against `langgraph dev`) fails after $PARALLAX_PEER_TEST_TIMEOUT_S seconds (default 120) with
  "timed out", so one hang does not stop the count (SIGALRM in the main thread, where pytest runs
  the test and its event loop);
- langgraph-sdk's test_remote_graph_v3.py hard-codes `URL = "http://localhost:2024"` (where
  `langgraph dev` listens): a module-level `URL` with that value is pointed at $PARALLAX_PEER_URL.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

HARD_CODED = "http://localhost:2024"


def _with_key(init: Any) -> Any:
    def patched(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        key = os.environ.get("PARALLAX_PEER_KEY")
        if key and "x-api-key" not in self.headers and "authorization" not in self.headers:
            self.headers["x-api-key"] = key

    return patched


def _handshake_with_key(headers: Any) -> list[tuple[str, str]]:
    given = dict(headers or {})
    key = os.environ.get("PARALLAX_PEER_KEY")
    if key and not {"x-api-key", "authorization"} & {name.lower() for name in given}:
        given["x-api-key"] = key
    return list(given.items())


def pytest_configure(config: pytest.Config) -> None:
    httpx.Client.__init__ = _with_key(httpx.Client.__init__)  # type: ignore[method-assign]
    httpx.AsyncClient.__init__ = _with_key(httpx.AsyncClient.__init__)  # type: ignore[method-assign]
    try:
        from langgraph_sdk.stream.transport import sync_ws, ws
    except ImportError:  # an SDK without the WebSocket transport
        return
    for module in (ws, sync_ws):
        if hasattr(module, "websocket_headers"):
            module.websocket_headers = _handshake_with_key


class TestTimedOut(Exception):
    """The test ran longer than PARALLAX_PEER_TEST_TIMEOUT_S."""


def _time_out(_signum: int, _frame: Any) -> None:
    raise TestTimedOut(f"timed out after {os.environ.get('PARALLAX_PEER_TEST_TIMEOUT_S', '120')} s")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _time_out)
    signal.alarm(int(os.environ.get("PARALLAX_PEER_TEST_TIMEOUT_S", "120")))
    try:
        return (yield)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    target = os.environ.get("PARALLAX_PEER_URL")
    if not target:
        return
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and getattr(module, "URL", None) == HARD_CODED:
            module.URL = target
