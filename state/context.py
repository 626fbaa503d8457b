"""Run configuration, passed as LangGraph `context` (read in nodes via `Runtime[Context]`).

Every field falls back to an environment variable, so the CLI, `langgraph dev` and a
deployed server all honour the same `.env` file, while an API caller can still override
a field per run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parallax import settings as settings_mod
from parallax.settings import env


def _env_float(name: str, default: float) -> float:
    return float(env(name, str(default)))


def _env_int(name: str, default: int) -> int:
    return int(env(name, str(default)))


@dataclass(kw_only=True)
class Context:
    """Which models answer, how hard we retry, and how big the pieces are."""

    model: str = field(default_factory=lambda: env("PARALLAX_MODEL", ""))
    """Model for direct and slice branches ('' = the endpoint's default)."""

    judge_model: str = field(default_factory=lambda: env("PARALLAX_JUDGE_MODEL", ""))
    """Model for the judge, red-team, reflect and curate calls ('' = `model`)."""

    vote_models: str = field(default_factory=lambda: env("PARALLAX_VOTE_MODELS", ""))
    """Comma-separated models cycled over vote branches ('' = `model`)."""

    temperature: float = field(default_factory=lambda: _env_float("PARALLAX_TEMPERATURE", 0.2))
    vote_temperature_min: float = 0.3
    vote_temperature_max: float = 1.0

    request_timeout_s: float = field(default_factory=lambda: _env_float("PARALLAX_REQUEST_TIMEOUT_S", 180.0))
    """Per attempt. The embedded server answers one request at a time, so queued branches wait."""

    max_attempts: int = field(default_factory=lambda: _env_int("PARALLAX_MAX_ATTEMPTS", 3))
    """Tries per model call on transient errors (429, 5xx, timeouts, connection)."""

    max_concurrency: int = field(default_factory=lambda: _env_int("PARALLAX_MAX_CONCURRENCY", 8))
    """Most model calls in flight per fan-out (see nodes/concurrency.py)."""

    straggler_factor: float = field(default_factory=lambda: _env_float(
        "PARALLAX_STRAGGLER_FACTOR", 0.0 if settings_mod.load().response_format == "json_object_schema" else 3.0))
    """Start a backup copy of a branch running this many times longer than its finished
    siblings' median (0 = never). Off by default for llama.cpp servers (the embedded one
    included): they answer one request at a time, so a copy could only queue behind the original."""

    straggler_min_s: float = field(default_factory=lambda: _env_float("PARALLAX_STRAGGLER_MIN_S", 1.0))
    """No backup for a branch that has run less than this, however fast its siblings were."""

    max_reasks: int = 2
    """Re-asks after a reply that does not parse; a re-ask is part of the same branch."""

    max_tokens: int = field(default_factory=lambda: _env_int("PARALLAX_MAX_TOKENS", 384))

    slice_chars: int = field(default_factory=lambda: _env_int("PARALLAX_SLICE_CHARS", 6000))
    """Largest slice a section branch receives (about 1,500 tokens)."""

    max_input_chars: int = field(default_factory=lambda: _env_int("PARALLAX_MAX_INPUT_CHARS", 2_000_000))

    playbook_chars: int = field(default_factory=lambda: _env_int("PARALLAX_PLAYBOOK_CHARS", 1200))
    """Budget for playbook items put into one branch prompt."""

    dedupe_threshold: float | None = field(
        default_factory=lambda: float(env("PARALLAX_DEDUPE_THRESHOLD")) if env("PARALLAX_DEDUPE_THRESHOLD") else None
    )
    """Embedding similarity above which two lessons are one item (None = the merge's default)."""

    guard_floor: float = field(default_factory=lambda: _env_float("PARALLAX_GUARD_FLOOR", 0.1))
    """Fewest lessons a batch must yield per reflection that carried lessons before the guard fires."""

    @property
    def reviewer_model(self) -> str:
        """Model for calls that judge other calls: judge, red team, reflector, curator."""
        return self.judge_model or self.model

    def models_for_votes(self, n: int) -> list[str]:
        pool = [m.strip() for m in self.vote_models.split(",") if m.strip()] or [self.model]
        return [pool[i % len(pool)] for i in range(n)]
