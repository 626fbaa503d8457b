"""`parallax model serve`: keep the embedded model server up for other processes to share.

CLI runs and `langgraph dev` find it through PARALLAX_HOME/model-server.json.
"""

from __future__ import annotations

from typing import Annotated

import typer

from parallax.cli.common import fail
from parallax.runtime import settings as settings_mod

model_app = typer.Typer(
    help="The embedded local model (llama.cpp server with SmolLM2-135M-Instruct).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@model_app.command("serve")
def model_serve(
    port: Annotated[
        int | None, typer.Option(help="Port on 127.0.0.1 (default: a free one).")
    ] = None,
) -> None:
    """Run the embedded model server in the foreground; other Parallax processes find and reuse
    it."""
    from parallax.runtime.model_server import ModelServerError, serve_forever

    try:
        serve_forever(settings_mod.load(), port=port)
    except ModelServerError as exc:
        fail(str(exc), code=1)
