"""Wait until a server we started answers: the embedded model server's /health, a replica's /ready.

Why one function: waiting for a freshly started server ends in one of three ways everywhere —
it answers 200, it died first, or the time ran out — and each caller only turns those into
its own error. Proxies from the environment are ignored: the server is ours, on loopback.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import httpx


def wait_for_200(url: str, timeout_s: float, alive: Callable[[], bool] = lambda: True,
                 interval_s: float = 0.25) -> Literal["ready", "died", "timeout"]:
    """GET `url` every `interval_s` until it answers 200 ("ready"), `alive()` turns false ("died"),
    or `timeout_s` passes ("timeout")."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(trust_env=False, timeout=2.0) as client:
        while alive():
            try:
                if client.get(url).status_code == 200:
                    return "ready"
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                return "timeout"
            time.sleep(interval_s)
    return "died"
