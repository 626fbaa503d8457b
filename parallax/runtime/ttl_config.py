"""How long API-written threads and store items live: Aegra's thread TTL turned on, `store.ttl`.

See docs/retention.md and docs/internals/process.md#thread-and-store-item-ttls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

NEVER_MIN = 1_000_000_000
"""Aegra's largest thread TTL (models/threads.py MAX_TTL_MINUTES), the default of threads created
without one."""
MAX_TTL_MIN = 1_000_000_000
"""The largest `ttl` a store item may ask for, in minutes (it fits the store's integer column)."""
THREAD_TTL_VARIABLES = ("AEGRA_THREAD_TTL", "LANGGRAPH_THREAD_TTL")
"""Aegra's own thread TTL variables: set, they win over aegra.json and over Parallax's settings."""


class StoreTTL(BaseModel):
    """aegra.json `store.ttl` (LangGraph Platform's `langgraph.json` keys) over the PARALLAX_STORE_*
    settings."""

    model_config = ConfigDict(extra="forbid")

    default_ttl: int | None = Field(
        None, ge=1, le=MAX_TTL_MIN, description="minutes an item put without a ttl lives"
    )
    refresh_on_read: bool = Field(
        True, description="a get or search restarts the ttl of what it reads"
    )
    sweep_interval_minutes: float = Field(
        1.0, ge=0, le=1440, description="between two sweeps (0: none)"
    )


def store_ttl(settings: Any, block: Mapping[str, Any] | None) -> StoreTTL:
    """The store TTL of this deployment: `block` (aegra.json `store.ttl`) over the settings.
    ValueError, one line, for a bad block."""
    base = {
        "default_ttl": settings.store_default_ttl_min,
        "refresh_on_read": settings.store_refresh_on_read,
        "sweep_interval_minutes": settings.store_ttl_sweep_s / 60,
    }
    if block is not None and not isinstance(block, Mapping):
        raise ValueError(f"aegra.json store.ttl must be an object, not {type(block).__name__}")
    try:
        return StoreTTL.model_validate({**base, **(block or {})})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"aegra.json store.ttl.{where}: {first['msg']}") from None


def thread_ttl_env(
    settings: Any, config: Mapping[str, Any], environ: Mapping[str, str]
) -> str | None:
    """AEGRA_THREAD_TTL for a replica serving `config` (an aegra.json's content): None when the
    operator configured Aegra's thread TTL (`checkpointer.ttl`, or one of THREAD_TTL_VARIABLES),
    which is then left as it is.
    """
    checkpointer = config.get("checkpointer")
    if isinstance(checkpointer, Mapping) and checkpointer.get("ttl") is not None:
        return None
    if any((environ.get(name) or "").strip() for name in THREAD_TTL_VARIABLES):
        return None
    return json.dumps(
        {
            "strategy": "delete",
            "default_ttl": settings.thread_default_ttl_min or NEVER_MIN,
            "sweep_interval_minutes": settings.thread_ttl_sweep_s / 60,
        }
    )
