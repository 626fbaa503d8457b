"""The deployed API's lifespan: while it lasts, this process serves callers, and every run in it is served.

Served runs trust no caller (runtime/run_context.py): whatever a node finds in its state, the tenant
comes from authentication (none: the run is refused), every store namespace is that tenant's, and no
command, repository or path on the server's disk is touched. A run started by a caller carries its
authenticated user anyway; marking the process covers a run that carries none, which then fails closed.
The rest of the lifespan is the replica's background work (server/background_loops.py).
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
