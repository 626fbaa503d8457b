"""The one line a run prints when its answer came from the embedded model.

Why: with no endpoint configured, Parallax answers with SmolLM2-135M, a 135M-parameter model that
follows the format and is usually wrong. The docs say so, but a first user reads the terminal,
not the docs, and takes "14 sheep" for Parallax's answer. So every run, learn and eval on the
embedded default ends with one dim line on stderr (stdout, and so --json, stays clean; the line fits
80 columns) that says what answered and how to point Parallax at a real endpoint.
PARALLAX_QUIET_MODEL_NOTICE=1 hides it; it is not printed when an endpoint is configured, when
PARALLAX_GGUF names another model, or when the caller handed in its own chat model
(`Context.chat_model`).
"""

from __future__ import annotations

from parallax.cli.common import err
from parallax.runtime import settings as settings_mod
from parallax.runtime.model_note import on_embedded_model
from parallax.state.context import Context

NOTICE = "note: tiny SmolLM2-135M answered, often wrong; use --base-url URL --model NAME"
"""One line that fits 80 columns; `--base-url`'s help and docs/cli.md name the variables (OPENAI_BASE_URL,
OPENAI_API_KEY, PARALLAX_MODEL) and PARALLAX_QUIET_MODEL_NOTICE."""


def print_model_notice(context: Context | None) -> None:
    """One dim line on stderr when the answers came from the embedded default model (unless silenced)."""
    if on_embedded_model(context) and not settings_mod.load().quiet_model_notice:
        err.print(NOTICE, style="dim", highlight=False, markup=False, soft_wrap=True)
