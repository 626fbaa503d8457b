"""Run configuration, passed as LangGraph `context` and read in nodes through `Runtime[Context]`.

Every field is optional: what a run leaves unset (None) comes from the process settings
(`PARALLAX_*` variables, see parallax/runtime/settings.py), filled in by
`parallax.runtime.run_context.resolved`. So the CLI, `langgraph dev` and a deployed server
honour the same `.env` file, while an API caller can still override a field per run, and
Studio shows each field with its description.

Three fields are for code, not for API callers: `chat_model` and `embedder` let a test or a
benchmark hand the graph a scripted model or a fake embedder instead of patching modules, and
`services` the process services (circuit breakers, straggler history, fan-out registry) it made.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

ChatModelFactory = Callable[..., Awaitable[Any]]
"""`await factory(model=..., timeout_s=..., max_tokens=...)` -> a LangChain chat model."""
Embedder = Callable[[list[str]], Any]
"""texts -> an (n, d) numpy array of unit vectors, one row per text, in order."""


def _describe(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class Context:
    """Which models answer, how hard we retry, and how big the pieces are (None = the process setting)."""

    model: str | None = field(default=None, metadata=_describe(
        "Model for direct and slice branches (PARALLAX_MODEL; '' = the endpoint's usual model)."))
    judge_model: str | None = field(default=None, metadata=_describe(
        "Model for the judge, red-team, reflect and curate calls (PARALLAX_JUDGE_MODEL; '' = model)."))
    vote_models: str | None = field(default=None, metadata=_describe(
        "Comma-separated models cycled over vote branches (PARALLAX_VOTE_MODELS; '' = model)."))
    temperature: float | None = field(default=None, metadata=_describe(
        "Temperature of direct and slice branches (PARALLAX_TEMPERATURE)."))
    vote_temperature_min: float | None = field(default=None, metadata=_describe(
        "Lowest temperature of the vote spread (PARALLAX_VOTE_TEMPERATURE_MIN; 0.7, as the highest: all votes at "
        "one temperature, so a wave's votes are one request with n where the endpoint takes it; below the highest, "
        "vote i of n gets min + (max - min)*i/(n-1), each its own request)."))
    vote_temperature_max: float | None = field(default=None, metadata=_describe(
        "Highest temperature of the vote spread (PARALLAX_VOTE_TEMPERATURE_MAX)."))
    request_timeout_s: float | None = field(default=None, metadata=_describe(
        "Seconds per model call attempt (PARALLAX_REQUEST_TIMEOUT_S)."))
    max_attempts: int | None = field(default=None, metadata=_describe(
        "Tries per model call on 429, 5xx, timeouts and connection errors (PARALLAX_MAX_ATTEMPTS)."))
    max_concurrency: int | None = field(default=None, metadata=_describe(
        "Most model calls in flight per fan-out (PARALLAX_MAX_CONCURRENCY)."))
    straggler_factor: float | None = field(default=None, metadata=_describe(
        "Start a backup copy of a branch running this many times longer than the median of its finished "
        "siblings; 0 = never (PARALLAX_STRAGGLER_FACTOR)."))
    straggler_min_s: float | None = field(default=None, metadata=_describe(
        "No backup copy before a branch has run this many seconds (PARALLAX_STRAGGLER_MIN_S)."))
    max_reasks: int = field(default=2, metadata=_describe(
        "Re-asks after a reply that does not parse; a re-ask belongs to the same branch, never a new vote."))
    max_tokens: int | None = field(default=None, metadata=_describe(
        "Most tokens per model reply (PARALLAX_MAX_TOKENS)."))
    early_stop: bool | None = field(default=None, metadata=_describe(
        "Ask a vote's branches in waves and stop once the leading answer is settled; votes is then the most "
        "asked (PARALLAX_EARLY_STOP; logic/stopping.py)."))
    vote_stop_threshold: float | None = field(default=None, metadata=_describe(
        "How sure the stopping rule must be that the leader is ahead, P(p > 1/2) under a Beta posterior "
        "(PARALLAX_VOTE_STOP_THRESHOLD)."))
    vote_first_wave: int | None = field(default=None, metadata=_describe(
        "Votes the first wave asks at once, at least (PARALLAX_VOTE_FIRST_WAVE)."))
    vote_plan: str | None = field(default=None, metadata=_describe(
        "How a vote with early stopping chooses its waves: priced (the least expected cost at the run's prompt size, "
        "the endpoint's cache and the price table), waves (the first wave, then the fewest votes that could settle, "
        "at least the first wave's), one_request (every vote at once) (PARALLAX_VOTE_PLAN; logic/vote_plan.py)."))
    ok_confidence: float | None = field(default=None, metadata=_describe(
        "The confidence a run needs to end ok; below it, needs_review (PARALLAX_OK_CONFIDENCE)."))
    slice_chars: int | None = field(default=None, metadata=_describe(
        "Largest slice a section branch receives, in characters (PARALLAX_SLICE_CHARS)."))
    max_input_chars: int | None = field(default=None, metadata=_describe(
        "Input size limit, task plus question (PARALLAX_MAX_INPUT_CHARS)."))
    playbook_chars: int | None = field(default=None, metadata=_describe(
        "Budget for playbook lessons in one branch prompt (PARALLAX_PLAYBOOK_CHARS)."))
    dedupe_threshold: float | None = field(default=None, metadata=_describe(
        "Embedding similarity above which two lessons are one item (PARALLAX_DEDUPE_THRESHOLD; default: the merge's 0.80)."))
    guard_floor: float | None = field(default=None, metadata=_describe(
        "Fewest lessons a learn batch must yield per reflection before the guard redoes the merge "
        "(PARALLAX_GUARD_FLOOR)."))
    plan_max_tasks: int | None = field(default=None, metadata=_describe(
        "Most tasks a plan may have; a longer plan is re-asked, then refused (PARALLAX_PLAN_MAX_TASKS)."))
    plan_contradiction_pairs: int | None = field(default=None, metadata=_describe(
        "Most pairs of similar findings a plan run asks the judge about (PARALLAX_PLAN_CONTRADICTION_PAIRS)."))
    tool_timeout_s: float | None = field(default=None, metadata=_describe(
        "Seconds an edit task's test command may run (PARALLAX_TOOL_TIMEOUT_S)."))
    trace_prompt_chars: int | None = field(default=None, metadata=_describe(
        "Most characters of branch prompts a run's trace keeps, for `parallax export`; a run with more keeps none "
        "and says so (PARALLAX_TRACE_PROMPT_CHARS)."))
    chat_model: Any = field(default=None, metadata=_describe(
        "For code only: a ChatModelFactory used instead of ChatOpenAI on the configured endpoint."))
    embedder: Any = field(default=None, metadata=_describe(
        "For code only: an Embedder used instead of the local MiniLM."))
    services: Any = field(default=None, metadata=_describe(
        "For code only: the Services (runtime/services.py) of the entry point that started the run; "
        "unset, the process's."))

    @property
    def reviewer_model(self) -> str:
        """Model for calls that judge other calls: judge, red team, reflector, curator."""
        return self.judge_model or self.model or ""

    def models_for_votes(self, n: int) -> list[str]:
        pool = [m.strip() for m in (self.vote_models or "").split(",") if m.strip()] or [self.model or ""]
        return [pool[i % len(pool)] for i in range(n)]


class UnresolvedContext(RuntimeError):
    """A bug: code read a setting from a Context that was not resolved (runtime/run_context.py `resolved`)."""


def filled(value: T | None) -> T:
    """A field of a resolved Context, which has every setting filled in (None = unset, before resolution)."""
    if value is None:
        raise UnresolvedContext("a Context setting is unset: resolve the Context first (parallax.runtime.run_context)")
    return value
