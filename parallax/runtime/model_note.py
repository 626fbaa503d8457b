"""Whether runs answer with the embedded toy model, and the words that say so on every face."""

from __future__ import annotations

from typing import Any

from parallax.runtime import settings as settings_mod
from parallax.runtime.settings import EMBEDDED_MODEL
from parallax.state.context import Context

EMBEDDED_NOTE = (
    "answered by the embedded SmolLM2-135M, a tiny test model that is often wrong: set"
    " OPENAI_BASE_URL (with OPENAI_API_KEY and PARALLAX_MODEL) to use a real model"
)


def on_embedded_model(context: Context | None = None) -> bool:
    """Whether model calls made with this context go to the embedded default model."""
    settings = settings_mod.load()
    return not (
        settings.base_url
        or settings.gguf
        or (context is not None and context.chat_model is not None)
    )


def model_note(context: Context | None = None) -> str:
    """The run's `note`: EMBEDDED_NOTE on the embedded default model, else ""."""
    return EMBEDDED_NOTE if on_embedded_model(context) else ""


def model_in_use() -> dict[str, Any]:
    """What a server's runs answer with, for its start line and `/ok`: {"embedded", "model",
    "endpoint", "note"}."""
    settings = settings_mod.load()
    if on_embedded_model():
        return {"embedded": True, "model": EMBEDDED_MODEL, "endpoint": None, "note": EMBEDDED_NOTE}
    if settings.base_url:
        return {
            "embedded": False,
            "model": settings.chat_model_name,
            "endpoint": settings.base_url,
            "note": "",
        }
    return {"embedded": False, "model": str(settings.gguf), "endpoint": None, "note": ""}
