"""A run's effective Context: what the caller set, the process settings for the rest.

Nodes call `context_of(runtime)` once per node run; the result has no unset fields (except
`dedupe_threshold`, where None means the merge's own default, and the two code-only
injection points). Resolving twice changes nothing, so a node may pass its Context on to a
subgraph as it is.
"""

from __future__ import annotations

import dataclasses

from langgraph.runtime import Runtime

from parallax.runtime import settings as settings_mod
from parallax.state.context import Context

FROM_SETTINGS = ("model", "judge_model", "vote_models", "temperature", "request_timeout_s", "max_attempts",
                 "max_concurrency", "straggler_min_s", "max_tokens", "slice_chars", "max_input_chars",
                 "playbook_chars", "dedupe_threshold", "guard_floor", "plan_max_tasks", "plan_contradiction_pairs",
                 "tool_timeout_s")


def resolved(ctx: Context | dict | None = None) -> Context:
    """`ctx` (a Context, the dict an API caller sent, or nothing) with every unset field filled in."""
    if isinstance(ctx, dict):
        ctx = Context(**ctx)
    ctx = ctx or Context()
    settings = settings_mod.load()
    values = {name: getattr(settings, name) for name in FROM_SETTINGS
              if getattr(ctx, name) is None and getattr(settings, name) is not None}
    if ctx.straggler_factor is None:
        values["straggler_factor"] = settings.straggler_factor_or_default
    return dataclasses.replace(ctx, **values) if values else ctx


def context_of(runtime: Runtime) -> Context:
    """The run's resolved Context, whether the caller passed one, a dict, or nothing."""
    return resolved(runtime.context)
