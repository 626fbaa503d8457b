"""What each branch of a fan-out gets, and how branches travel in `Send` tasks.

A branch is one unit of model work with its own id and trace record. A LangGraph task
(one `Send`) carries a group of branches: up to `MAX_TASKS` tasks per run, so five votes
are five tasks, while a thousand votes are ten tasks of a hundred. Each LangGraph task
costs about a millisecond of scheduling and checkpoint writes; grouping keeps a wide
fan-out near the speed of a bare `asyncio.gather` (see bench/fanout.py).
"""

from __future__ import annotations

import time
import uuid

from parallax.state.context import Context
from parallax.state.solve import SolveState

MAX_TASKS = 10


def spread(low: float, high: float, n: int) -> list[float]:
    return [low] if n == 1 else [round(low + (high - low) * i / (n - 1), 3) for i in range(n)]


def branch_specs(state: SolveState, ctx: Context) -> list[dict]:
    """What each business branch gets: only its own text, plus brief, question and lessons."""
    task, question, route = state["task"], state.get("question", ""), state["mode"]
    selections = state.get("playbook_selections") or [[]]
    now = round(time.time(), 3)

    def spec(kind: str, text: str, lessons: list[dict], **extra) -> dict:
        return {"id": f"{kind}-{uuid.uuid4().hex[:8]}", "kind": kind, "parent_id": state["trace_id"], "planned_at": now,
                "text": text, "question": question, "playbook": lessons, **extra}

    if route == "vote":
        n = state.get("votes", 5)
        temperatures = spread(ctx.vote_temperature_min, ctx.vote_temperature_max, n)
        return [spec("vote", task, selections[0], model=m, temperature=t, index=i)
                for i, (m, t) in enumerate(zip(ctx.models_for_votes(n), temperatures, strict=True))]
    if route == "section":
        slices = state["slices"]
        brief = f"A document of {len(task)} characters in {len(slices)} parts; each part is read separately."
        return [spec("slice", part, selections[i], model=ctx.model, temperature=ctx.temperature, index=i,
                     total=len(slices), brief=brief)
                for i, part in enumerate(slices)]
    return [spec("direct", task, selections[0], model=ctx.model, temperature=ctx.temperature, index=0)]


def group(specs: list[dict]) -> list[list[dict]]:
    """Split branches into at most MAX_TASKS groups, in order."""
    size = -(-len(specs) // min(len(specs), MAX_TASKS))
    return [specs[i : i + size] for i in range(0, len(specs), size)]
