"""Where model calls go: OPENAI_BASE_URL, else `parallax model serve`, else an embedded child."""

from __future__ import annotations

import atexit
import threading
from typing import Any

import psutil

from parallax.runtime.model_server.process import (
    LocalModelServer,
    ModelServerError,
    peak_rss_mb,
    read_server_file,
    wait_for_200,
)
from parallax.runtime.settings import Settings, load

_lock = threading.Lock()
_resolved: str | None = None
_server: LocalModelServer | None = None
_failure: str | None = None


def _advertised_url(settings: Settings) -> str | None:
    data = read_server_file(settings.model_server_file)
    if not data or not isinstance(data.get("pid"), int) or not psutil.pid_exists(data["pid"]):
        return None
    url = str(data.get("url", "")).rstrip("/")
    return url if wait_for_200(url.removesuffix("/v1") + "/health", 0) == "ready" else None


def known_endpoint() -> str | None:
    """The URL `endpoint` settled on in this process, or None before the first call (no
    blocking)."""
    return _resolved


def endpoint(settings: Settings) -> str:
    """The endpoint for model calls: OPENAI_BASE_URL, else `parallax model serve`, else embedded.

    Blocking (wrap in asyncio.to_thread); thread-safe; resolved once per process, so
    later calls are a couple of attribute reads. A failed start is remembered too, so
    N concurrent callers do not each wait out the startup timeout.
    """
    global _resolved, _server, _failure
    if settings.base_url:
        return settings.base_url
    if _resolved is not None:
        return _resolved
    with _lock:
        if _resolved is None:
            if _failure is not None:
                raise ModelServerError(_failure)
            url = _advertised_url(settings)
            if url is None:
                try:
                    server = LocalModelServer(settings).start()
                except ModelServerError as e:
                    _failure = str(e)
                    raise
                _server = server
                url = server.url
            _resolved = url
        return _resolved


@atexit.register
def shutdown() -> None:
    """Stop this process's embedded server and forget the URL (at exit; tests that switch
    endpoints).

    No lock: at exit a daemon thread may still hold `_lock` mid-start.
    """
    global _resolved, _server, _failure
    server, _server, _resolved, _failure = _server, None, None, None
    if server is not None:
        server.stop()


def server_process() -> dict[str, Any] | None:
    """The embedded server this process uses (started or advertised): pid, parallel slots and
    peak RSS; None when the endpoint is not the embedded server."""
    if _resolved is None:
        return None
    pid: int
    parallel: int | None
    if _server is not None and _server.process is not None:
        pid, parallel = _server.process.pid, _server.settings.model_parallel
    else:
        data = read_server_file(load().model_server_file) or {}
        if str(data.get("url", "")).rstrip("/") != _resolved or not isinstance(
            data.get("pid"), int
        ):
            return None
        pid, parallel = data["pid"], data.get("parallel")
    return {"pid": pid, "parallel": parallel, "peak_rss_mb": peak_rss_mb(pid)}


def started_server() -> LocalModelServer | None:
    """The embedded server this process started itself (None when it uses another endpoint or none
    yet)."""
    return _server
