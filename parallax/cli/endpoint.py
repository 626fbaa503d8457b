"""`--model` and `--base-url`: one command's model calls pointed elsewhere, restored when it ends.

They set the process settings' variables rather than Context fields: see
docs/internals/cli.md#the-endpoint-of-one-command.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from parallax.cli.common import fail
from parallax.runtime.settings import reload_settings

Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        help=(
            "Model for this command's calls (overrides PARALLAX_MODEL; the judge and voters too"
            " unless PARALLAX_JUDGE_MODEL / PARALLAX_VOTE_MODELS name others)."
        ),
    ),
]
BaseUrl = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help=(
            "OpenAI-compatible endpoint (…/v1) for this command (overrides OPENAI_BASE_URL; "
            "default: the embedded local model)."
        ),
    ),
]


def use_endpoint(cli: typer.Context | None, model: str | None, base_url: str | None) -> None:
    """Set PARALLAX_MODEL / OPENAI_BASE_URL for this command from its options; restore them when it
    ends."""
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        fail(
            f"--base-url {base_url!r}: give an http:// or https:// URL, e.g."
            " http://localhost:8000/v1"
        )
    if model is not None and not model.strip():
        fail("--model is empty: give a model name, or leave the option out")
    wanted = {
        name: value
        for name, value in (("PARALLAX_MODEL", model), ("OPENAI_BASE_URL", base_url))
        if value is not None
    }
    if not wanted:
        return
    before = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    reload_settings()

    def restore() -> None:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        reload_settings()

    if cli is not None:
        cli.call_on_close(restore)
