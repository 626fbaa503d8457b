"""The `parallax` command line, assembled from one module per command group.

The modules are on docs/architecture.md's map; help uses click's plain layout
(docs/internals/cli.md#help-and-errors).
"""

from __future__ import annotations

from typing import Annotated

import typer

from parallax.cli import (
    export,
    feedback,
    learn,
    loop,
    mcp,
    model,
    plan,
    playbook,
    prompts,
    release,
    run,
    serve,
    stats,
    sweep,
    trace,
)
from parallax.cli.common import err, fail
from parallax.cli.examples import epilog
from parallax.cli.usage_errors import ParallaxGroup
from parallax.cli.version import print_version
from parallax.runtime import settings as settings_mod

app = typer.Typer(
    help=(
        "Parallax: run LLM work in parallel branches (direct, section, vote), merge one validated"
        " answer, and learn a versioned playbook from the runs."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    cls=ParallaxGroup,
)


@app.callback()
def check_settings(
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=print_version,
            help="Print the installed version and exit.",
        ),
    ] = False,
) -> None:
    """Refuse a bad PARALLAX_* or OPENAI_* variable with one line before any command starts; say
    once when the data lives in a ./.parallax of the working folder rather than the user data
    directory."""
    import os

    from parallax.runtime.home import legacy_notice
    from parallax.runtime.settings import reload_settings

    # each command reads the environment and .env once, as they are when it starts
    reload_settings()
    try:
        settings = settings_mod.load()
    except settings_mod.SettingsError as exc:
        fail(f"{exc} (fix or unset the variable, in the environment or in ./.env)")
    notice = legacy_notice(settings.home, home_is_set=bool(os.environ.get("PARALLAX_HOME")))
    if notice:
        err.print(
            notice, style="dim", highlight=False, markup=False
        )  # wrapped at words, never mid-path


app.command("run", epilog=epilog("run"))(run.run)
app.command("resume")(run.resume)
app.command("learn", epilog=epilog("learn"))(learn.learn)
app.command("eval")(learn.evaluate_command)
app.command("trace")(trace.trace)
app.add_typer(playbook.playbook_app, name="playbook")
app.add_typer(trace.dlq_app, name="dlq")
app.add_typer(model.model_app, name="model")
app.command("serve", epilog=epilog("serve"))(serve.serve)
app.command("sweep")(sweep.sweep)
app.command("mcp")(mcp.mcp)
app.command("stats")(stats.stats)
app.command("feedback", epilog=epilog("feedback"))(feedback.feedback)
app.add_typer(export.export_app, name="export")
app.add_typer(prompts.prompts_app, name="prompts")
app.add_typer(loop.loop_app, name="loop")
release.add_release_commands(playbook.playbook_app, "playbook")
app.add_typer(plan.plan_app, name="plan")
