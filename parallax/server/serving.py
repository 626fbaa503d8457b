"""The deployed API's lifespan: served mode (no caller trusted) around the replica's loops.

See docs/internals/server.md#the-replicas-lifespan-and-background-loops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from parallax.runtime.run_context import serving
from parallax.server import background_loops


@asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    with serving():
        async with background_loops.lifespan(app):
            yield
