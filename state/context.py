"""`Context`: a run's configuration, passed as LangGraph `context`, read through `Runtime[Context]`.

Unset fields come from the process settings; each field states its meaning, bounds and served rule
(docs/internals/runs.md#run-settings-and-their-served-rules).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from parallax.state.inputs import INPUT_CHARS, MAX_VOTES

T = TypeVar("T")

ChatModelFactory = Callable[..., Awaitable[Any]]
"""`await factory(model=..., timeout_s=..., max_tokens=...)` -> a LangChain chat model."""
Embedder = Callable[[list[str]], Any]
"""texts -> an (n, d) numpy array of unit vectors, one row per text, in order."""
ServedRule = Literal["ceiling", "floor", "model"]
SERVED_RULES: dict[ServedRule, str] = {
    "ceiling": "a served caller may lower it, not raise it above the server's setting",
    "floor": (
        "a served caller may raise it (or set 0: off), not lower it below the server's setting"
    ),
    "model": "a served caller may name only a model the server allows (PARALLAX_ALLOWED_MODELS)",
}
"""What each served rule lets a caller of the served API do (docs/internals/runs.md says why)."""
MODEL_CHARS = 200
"""The longest model name."""
MAX_SECONDS = 3600.0
"""The longest wait a run setting may ask for (a model call, a test command, a backup's start)."""


def _setting(text: str, served: ServedRule | None = None, **bounds: float) -> dict[str, Any]:
    """A field's metadata: its description, its absolute bounds (pydantic's ge, gt, le, lt,
    max_length) and its served rule."""
    return {"description": text, "bounds": bounds, "served": served}


def _code(text: str) -> dict[str, Any]:
    return {"description": text, "code_only": True}


@dataclass(kw_only=True)
class Context:
    """Which models answer, how hard we retry, and how big the pieces are (None = the process
    setting)."""

    model: str | None = field(
        default=None,
        metadata=_setting(
            "Model for direct and slice branches (PARALLAX_MODEL; '' = the endpoint's usual"
            " model).",
            served="model",
            max_length=MODEL_CHARS,
        ),
    )
    judge_model: str | None = field(
        default=None,
        metadata=_setting(
            "Model for the judge, red-team, reflect and curate calls (PARALLAX_JUDGE_MODEL; '' ="
            " model).",
            served="model",
            max_length=MODEL_CHARS,
        ),
    )
    vote_models: str | None = field(
        default=None,
        metadata=_setting(
            "Comma-separated models cycled over vote branches (PARALLAX_VOTE_MODELS; '' = model).",
            served="model",
            max_length=10 * MODEL_CHARS,
        ),
    )
    temperature: float | None = field(
        default=None,
        metadata=_setting(
            "Temperature of direct and slice branches (PARALLAX_TEMPERATURE).", ge=0, le=2
        ),
    )
    vote_temperature_min: float | None = field(
        default=None,
        metadata=_setting(
            "Lowest temperature of the vote spread (PARALLAX_VOTE_TEMPERATURE_MIN; 0.7, as the"
            " highest: all votes at one temperature, so a wave's votes are one request with n where"
            " the endpoint takes it; below the highest, vote i of n gets min + (max - min)*i/(n-1),"
            " each its own request).",
            ge=0,
            le=2,
        ),
    )
    vote_temperature_max: float | None = field(
        default=None,
        metadata=_setting(
            "Highest temperature of the vote spread (PARALLAX_VOTE_TEMPERATURE_MAX).", ge=0, le=2
        ),
    )
    request_timeout_s: float | None = field(
        default=None,
        metadata=_setting(
            "Seconds per model call attempt (PARALLAX_REQUEST_TIMEOUT_S).",
            served="ceiling",
            gt=0,
            le=MAX_SECONDS,
        ),
    )
    max_attempts: int | None = field(
        default=None,
        metadata=_setting(
            "Tries per model call on 429, 5xx, timeouts and connection errors"
            " (PARALLAX_MAX_ATTEMPTS).",
            served="ceiling",
            ge=1,
            le=20,
        ),
    )
    max_concurrency: int | None = field(
        default=None,
        metadata=_setting(
            "Most model calls in flight per fan-out (PARALLAX_MAX_CONCURRENCY).",
            served="ceiling",
            ge=1,
            le=1024,
        ),
    )
    straggler_factor: float | None = field(
        default=None,
        metadata=_setting(
            "Start a backup copy of a branch running this many times longer than the median of its"
            " finished siblings; 0 = never (PARALLAX_STRAGGLER_FACTOR).",
            served="floor",
            ge=0,
            le=100,
        ),
    )
    straggler_min_s: float | None = field(
        default=None,
        metadata=_setting(
            "No backup copy before a branch has run this many seconds (PARALLAX_STRAGGLER_MIN_S).",
            served="floor",
            ge=0,
            le=MAX_SECONDS,
        ),
    )
    max_reasks: int | None = field(
        default=None,
        metadata=_setting(
            "Re-asks after a reply that does not parse; a re-ask belongs to the same branch, never"
            " a new vote (PARALLAX_MAX_REASKS).",
            served="ceiling",
            ge=0,
            le=10,
        ),
    )
    max_tokens: int | None = field(
        default=None,
        metadata=_setting(
            "Most tokens per model reply (PARALLAX_MAX_TOKENS).", served="ceiling", ge=1, le=200_000
        ),
    )
    early_stop: bool | None = field(
        default=None,
        metadata=_setting(
            "Ask a vote's branches in waves and stop once the leading answer is settled; votes is"
            " then the most asked (PARALLAX_EARLY_STOP; logic/stopping.py)."
        ),
    )
    vote_stop_threshold: float | None = field(
        default=None,
        metadata=_setting(
            "How sure the stopping rule must be that the leader is ahead, P(p > 1/2) under a Beta"
            " posterior (PARALLAX_VOTE_STOP_THRESHOLD).",
            gt=0.5,
            lt=1,
        ),
    )
    vote_first_wave: int | None = field(
        default=None,
        metadata=_setting(
            "Votes the first wave asks at once (PARALLAX_VOTE_FIRST_WAVE).", ge=1, le=MAX_VOTES
        ),
    )
    vote_plan: Literal["priced", "waves", "one_request"] | None = field(
        default=None,
        metadata=_setting(
            "How a vote with early stopping chooses its waves: priced (the least expected cost at"
            " the run's prompt size, the endpoint's cache and the price table), waves (the first"
            " wave, then the fewest votes that could settle, at least the first wave's),"
            " one_request (every vote at once) (PARALLAX_VOTE_PLAN; logic/vote_plan.py)."
        ),
    )
    ok_confidence: float | None = field(
        default=None,
        metadata=_setting(
            "The confidence a run needs to end ok; below it, needs_review"
            " (PARALLAX_OK_CONFIDENCE).",
            ge=0,
            le=1,
        ),
    )
    slice_chars: int | None = field(
        default=None,
        metadata=_setting(
            "Largest slice a section branch receives, in characters (PARALLAX_SLICE_CHARS).",
            served="ceiling",
            ge=1,
            le=INPUT_CHARS,
        ),
    )
    max_input_chars: int | None = field(
        default=None,
        metadata=_setting(
            "Input size limit, task plus question (PARALLAX_MAX_INPUT_CHARS).",
            served="ceiling",
            ge=1,
            le=INPUT_CHARS,
        ),
    )
    playbook_chars: int | None = field(
        default=None,
        metadata=_setting(
            "Budget for playbook lessons in one branch prompt (PARALLAX_PLAYBOOK_CHARS).",
            served="ceiling",
            ge=0,
            le=1_000_000,
        ),
    )
    dedupe_threshold: float | None = field(
        default=None,
        metadata=_setting(
            "Embedding similarity above which two lessons are one item (PARALLAX_DEDUPE_THRESHOLD;"
            " default: the merge's 0.80).",
            ge=-1,
            le=1,
        ),
    )
    guard_floor: float | None = field(
        default=None,
        metadata=_setting(
            "Fewest lessons a learn batch must yield per reflection before the guard redoes the"
            " merge (PARALLAX_GUARD_FLOOR).",
            ge=0,
            le=100,
        ),
    )
    plan_max_tasks: int | None = field(
        default=None,
        metadata=_setting(
            "Most tasks a plan may have; a longer plan is re-asked, then refused"
            " (PARALLAX_PLAN_MAX_TASKS).",
            served="ceiling",
            ge=1,
            le=200,
        ),
    )
    plan_contradiction_pairs: int | None = field(
        default=None,
        metadata=_setting(
            "Most pairs of similar findings a plan run asks the judge about"
            " (PARALLAX_PLAN_CONTRADICTION_PAIRS).",
            served="ceiling",
            ge=0,
            le=1000,
        ),
    )
    tool_timeout_s: float | None = field(
        default=None,
        metadata=_setting(
            "Seconds an edit task's test command may run (PARALLAX_TOOL_TIMEOUT_S).",
            served="ceiling",
            gt=0,
            le=MAX_SECONDS,
        ),
    )
    trace_prompt_chars: int | None = field(
        default=None,
        metadata=_setting(
            "Most characters of branch prompts a run's trace keeps, for `parallax export`; a run"
            " with more keeps none and says so (PARALLAX_TRACE_PROMPT_CHARS).",
            served="ceiling",
            ge=0,
            le=INPUT_CHARS,
        ),
    )
    chat_model: Any = field(
        default=None,
        metadata=_code(
            "For code only: a ChatModelFactory used instead of ChatOpenAI on the configured"
            " endpoint."
        ),
    )
    embedder: Any = field(
        default=None, metadata=_code("For code only: an Embedder used instead of the local MiniLM.")
    )
    services: Any = field(
        default=None,
        metadata=_code(
            "For code only: the Services (runtime/services.py) of the entry point that started the"
            " run; unset, the process's."
        ),
    )

    @property
    def reviewer_model(self) -> str:
        """Model for calls that judge other calls: judge, red team, reflector, curator."""
        return self.judge_model or self.model or ""

    def models_for_votes(self, n: int) -> list[str]:
        pool = [m.strip() for m in (self.vote_models or "").split(",") if m.strip()] or [
            self.model or ""
        ]
        return [pool[i % len(pool)] for i in range(n)]


class UnresolvedContext(RuntimeError):
    """A bug: code read a setting from a Context that was not resolved (runtime/run_context.py
    `resolved`)."""


def setting(value: T | None) -> T:
    """A field of a resolved Context, which has every setting filled in (None = unset, before
    resolution)."""
    if value is None:
        raise UnresolvedContext(
            "a Context setting is unset: resolve the Context first (parallax.runtime.run_context)"
        )
    return value


CODE_ONLY = tuple(f.name for f in dataclasses.fields(Context) if f.metadata.get("code_only"))
"""Context fields for code only, never from a caller over the wire."""
RUN_SETTINGS = tuple(f.name for f in dataclasses.fields(Context) if not f.metadata.get("code_only"))
"""Context fields a caller may set: each is also a process setting of the same name
(runtime/settings.py)."""


def bounds(name: str) -> dict[str, Any]:
    """The absolute bounds of run setting `name`, as pydantic `Field` arguments (ge, gt, le, lt,
    max_length)."""
    return dict(_metadata(name)["bounds"])


def served_rule(name: str) -> ServedRule | None:
    """How the served API holds run setting `name` (SERVED_RULES), or None: as any caller."""
    rule: ServedRule | None = _metadata(name)["served"]
    return rule


def _metadata(name: str) -> Any:
    return next(f.metadata for f in dataclasses.fields(Context) if f.name == name)
