"""Process-wide settings read from the environment (and a `.env` file).

Why a separate module: the CLI, the graph nodes, the local model server and the
benchmarks all need the same answers to "where do we keep data" and "which model
endpoint do we talk to", and those answers must come from one place so that a
`.env` file or an exported variable changes all of them at once.
"""

from __future__ import annotations

import functools
import gc
import os
from dataclasses import dataclass
from pathlib import Path

from dotenv import load_dotenv

load_dotenv(override=False)


def env(name: str, default: str | None = None) -> str | None:
    """Read an environment variable, treating an empty string as unset."""
    value = os.environ.get(name)
    return value if value not in (None, "") else default


@dataclass(frozen=True)
class Settings:
    """What the environment says, resolved once per call to `load()`."""

    home: Path
    base_url: str | None
    api_key: str
    model: str
    gguf: str | None
    response_format: str

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


NAMES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "PARALLAX_HOME", "PARALLAX_MODEL", "PARALLAX_GGUF", "PARALLAX_RESPONSE_FORMAT")


def load() -> Settings:
    """Current settings; cheap to call per model call (memoised on the variables' values)."""
    return _load(tuple(map(os.environ.get, NAMES)))


@functools.lru_cache(maxsize=8)
def _load(_values: tuple) -> Settings:
    base_url = env("OPENAI_BASE_URL")
    return Settings(
        home=Path(env("PARALLAX_HOME", ".parallax")).expanduser(),
        base_url=base_url,
        api_key=env("OPENAI_API_KEY", "not-needed-for-local"),
        model=env("PARALLAX_MODEL", "gpt-4o-mini" if base_url else "smollm2-135m-instruct"),
        gguf=env("PARALLAX_GGUF"),
        # llama.cpp's server takes {"type":"json_object","schema":...}; OpenAI, vLLM and
        # Ollama take {"type":"json_schema",...}. "none" sends no response_format at all.
        response_format=env(
            "PARALLAX_RESPONSE_FORMAT", "json_schema" if base_url else "json_object_schema"
        ),
    )


def freeze_startup_objects() -> None:
    """Move everything allocated so far (imported modules, compiled graphs) out of GC's reach.

    A wide fan-out allocates many short-lived objects; each full collection would
    otherwise walk the hundreds of thousands of long-lived objects that langchain,
    langgraph and pydantic create at import, which roughly doubled per-branch CPU in
    bench/fanout.py. Call once, after imports and before running a graph.
    """
    gc.collect()
    gc.freeze()
