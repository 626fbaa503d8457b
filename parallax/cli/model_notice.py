"""The one line a run prints on stderr when its answer came from the embedded toy model.

When and why: docs/cli.md#the-model-and-the-endpoint-of-one-command and
docs/internals/cli.md#output-for-people.
"""

from __future__ import annotations

from parallax.cli.common import err
from parallax.runtime import settings as settings_mod
from parallax.runtime.model_note import on_embedded_model
from parallax.state.context import Context

NOTICE = "note: tiny SmolLM2-135M answered, often wrong; use --base-url URL --model NAME"
"""One line that fits 80 columns; `--base-url`'s help and docs/cli.md name the variables
(OPENAI_BASE_URL, OPENAI_API_KEY, PARALLAX_MODEL) and PARALLAX_QUIET_MODEL_NOTICE."""


def print_model_notice(context: Context | None) -> None:
    """One dim line on stderr when the answers came from the embedded default model (unless
    silenced)."""
    if on_embedded_model(context) and not settings_mod.load().quiet_model_notice:
        err.print(NOTICE, style="dim", highlight=False, markup=False, soft_wrap=True)
