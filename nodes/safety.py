"""The safety check that runs beside the business branches, not after them.

Rules, not a model: they cannot be talked out of a verdict by the injection they look for. A flag
makes the run `needs_review`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from parallax.runtime.screening import screen_input
from parallax.state.lifecycle import BranchState, Lifecycle
from parallax.state.payloads import BranchRecord
from parallax.state.records import SafetyTask


async def check_safety(state: SafetyTask) -> dict[str, Any]:
    """The `safety` branch: screens the full input and records its verdict like any branch."""
    started = time.perf_counter()
    life = Lifecycle()
    steps: tuple[BranchState, ...] = ("PENDING", "DISPATCHED", "IN_PROGRESS")
    for step in steps:
        life.move(step)
    reasons = screen_input(state["text"])
    life.move("COMPLETED")
    record = BranchRecord(
        id=f"safety-{uuid.uuid4().hex[:8]}",
        parent_id=state["trace_id"],
        kind="safety",
        status="ok",
        latency_ms=(time.perf_counter() - started) * 1000,
        output={"flagged": bool(reasons), "reasons": reasons},
        state=life.state,
        transitions=life.transitions,
    )
    return {"branches": [record.model_dump()]}
