"""The `parallax` command line: one module per command group, assembled here.

    run, resume        cli/run.py       one task through the solve graph (or the plan graph)
    learn, eval        cli/learn.py     improve a playbook from tasks; measure one
    playbook ...       cli/playbook.py  versions: show, history, diff, rollback, export, import, ...
    trace, dlq ...     cli/trace.py     what each branch did; branches that gave up
    model serve        cli/model.py     keep the embedded model server up
    serve              cli/serve.py     one replica of the deployed graph API (Aegra)
    sweep              cli/sweep.py     one retention sweep of the deployment's database
    mcp                cli/mcp.py       the MCP tools over stdio, for a desktop agent
    stats              cli/stats.py     run metrics from the stored traces
    feedback           cli/feedback.py  a person's score on a run, or its right answer
    loop ...           cli/loop.py      the closed loop: once, status, install (a cron on the served API)
    export ...         cli/export.py    fine-tuning data (sft, preferences) from the traces
    prompts ...        cli/prompts.py   versioned node prompts (gated, gray-released)
    playbook release|canary  cli/release.py  gray release (shared with prompts)
    plan show          cli/plan.py      a plan run's DAG as Mermaid or PNG
    --version          cli/version.py   the installed version
Shared helpers are in cli/common.py, which imports no command; the examples that end `--help`
are in cli/examples.py; click's own usage errors get the same `error:` prefix (cli/usage_errors.py).

Help is click's plain layout (`rich_markup_mode=None`): Typer's rich panels print a type
placeholder after every option, flags too (`--json <bool>`), which reads as if a flag took a
value; the plain layout prints none for flags, and reads the same in a pipe.
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
    help="Parallax: run LLM work in parallel branches (direct, section, vote), merge one validated answer, "
         "and learn a versioned playbook from the runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    cls=ParallaxGroup,
)


@app.callback()
def check_settings(
    _version: Annotated[bool, typer.Option("--version", is_eager=True, callback=print_version,
                                           help="Print the installed version and exit.")] = False,
) -> None:
    """Refuse a bad PARALLAX_* or OPENAI_* variable with one line before any command starts; say once when the
    data lives in a ./.parallax of the working folder rather than the user data directory."""
    import os

    from parallax.runtime.home import legacy_notice
    from parallax.runtime.settings import reload_settings

    reload_settings()  # each command reads the environment and .env once, as they are when it starts
    try:
        settings = settings_mod.load()
    except settings_mod.SettingsError as exc:
        fail(f"{exc} (fix or unset the variable, in the environment or in ./.env)")
    notice = legacy_notice(settings.home, home_is_set=bool(os.environ.get("PARALLAX_HOME")))
    if notice:
        err.print(notice, style="dim", highlight=False, markup=False)  # wrapped at words, never mid-path


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
