"""The time stamp every stored record carries.

Why its own module: records are stamped by the stores (runtime/storage/), by lesson screening (a quarantine
entry, runtime/lesson_screening.py, which the playbook store calls on every commit), by nodes and by the data
loop's decisions; the stamp belongs to none of them, so storage and what storage calls both build on it.
"""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    """UTC, ISO 8601, microseconds (so they sort)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")
