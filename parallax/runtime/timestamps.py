"""The time stamp every stored record carries, below both storage and what storage calls."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    """UTC, ISO 8601, microseconds (so they sort)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")
