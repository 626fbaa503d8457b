"""The `parallax` command line.

`parallax run` compiles the solve graph with SQLite checkpointing under PARALLAX_HOME
and shows the branches as they finish; `--json` prints one object for machines.
`parallax model serve` keeps the embedded model server up for other processes
(`langgraph dev`, repeated runs) to share.

Exit codes: 0 ok or needs_review, 1 the run failed, 2 bad input (one line, nothing written).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from parallax import settings as settings_mod
from parallax.cli_playbook import Tenant, checked_tenant, new_table
from state.solve import SolveOutput

app = typer.Typer(
    help="Parallax: run LLM work in parallel branches (direct, section, vote) and merge one validated answer.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
model_app = typer.Typer(help="The embedded local model (llama.cpp server with SmolLM2-135M-Instruct).")
app.add_typer(model_app, name="model")

err = Console(stderr=True)
MODES = ("auto", "direct", "section", "vote")
OUTPUT_KEYS = tuple(SolveOutput.__annotations__)


def fail(message: str, code: int = 2) -> None:
    """One line on stderr and an exit code; no traceback."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def read_task(text: Optional[str], input_file: Optional[Path]) -> str:
    if text is not None and input_file is not None:
        fail("give the task as TEXT or --input-file, not both")
    if input_file is not None:
        if str(input_file) == "-":
            data = sys.stdin.buffer.read()
        elif not input_file.is_file():
            fail(f"input file not found: {input_file}")
        else:
            data = input_file.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            fail(f"{input_file} is not UTF-8 text (byte {exc.start}): convert it, e.g. with iconv -t utf-8")
    if text is None:
        fail("no task: give TEXT, or --input-file FILE (use - for stdin)")
    if not text.strip():
        fail("the task is empty: give some text to work on")
    return text


@asynccontextmanager
async def durable_graph(builder=None):
    """A graph (default: solve) with SQLite checkpoints and store under PARALLAX_HOME."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from nodes.playbook_access import open_sqlite_store

    if builder is None:
        from graphs.solve import builder

    async with open_sqlite_store() as store, \
            AsyncSqliteSaver.from_conn_string(str(settings_mod.load().checkpoint_path)) as saver:
        graph = builder.compile(checkpointer=saver, store=store)
        settings_mod.freeze_startup_objects()
        yield graph


def branch_table(branches: list[dict]) -> Table:
    table = new_table("branches", ("id", "kind", "status", "latency", "tokens", "attempts", "vote / output"))
    for b in branches:
        shown = (b.get("vote") or b.get("error") or json.dumps(b.get("output")))[:60]
        table.add_row(b["id"], b["kind"], b["status"], f"{b['latency_ms']:.0f} ms", str(b["tokens"]["total"]),
                      str(b["attempts"] + b["reasks"]), shown)
    return table


async def _run(payload: dict | None, thread_id: str, concurrency: int, show_progress: bool) -> dict:
    """Run (or, with `payload=None`, resume) the solve graph on a checkpointed thread."""
    from nodes.route import InvalidInput
    from parallax.local_model import ModelServerError
    from state.context import Context

    config = {"configurable": {"thread_id": thread_id}}
    result: dict = {}
    done = 0
    try:
        async with durable_graph() as graph:
            if payload is None:
                snapshot = await graph.aget_state(config)
                if not snapshot.values:
                    fail(f"no run with thread id {thread_id!r} under {settings_mod.load().home} (check PARALLAX_HOME)")
                result = {k: v for k, v in snapshot.values.items() if k in OUTPUT_KEYS}
                if not snapshot.next:  # finished already: report it, run nothing
                    return result
            with err.status("routing…" if payload else "resuming…") as status:
                async for mode, chunk in graph.astream(payload, config, context=Context(max_concurrency=concurrency), durability="sync",
                                                       stream_mode=["updates", "values"]):
                    if mode == "values":
                        result = {k: v for k, v in chunk.items() if k in OUTPUT_KEYS}
                        continue
                    for node, update in chunk.items():
                        if node == "route" and show_progress:
                            err.print(f"route: [bold]{update['mode']}[/]"
                                      + (f" ({len(update['slices'])} slices)" if update["slices"] else ""))
                        for record in (update or {}).get("branches", []):
                            done += 1
                            if show_progress:
                                status.update(f"{done} branches done (last: {record['kind']} {record['status']})")
    except InvalidInput as exc:
        fail(str(exc))
    except ModelServerError as exc:
        fail(f"model server: {exc}", code=1)
    return result


@app.command()
def run(
    text: Annotated[Optional[str], typer.Argument(help="The task text (or use --input-file).")] = None,
    question: Annotated[str, typer.Option("--question", "-q", help="Question about the text (section mode asks it of every slice).")] = "",
    input_file: Annotated[Optional[Path], typer.Option("--input-file", "-f", help="Read the task from a UTF-8 file ('-' for stdin).")] = None,
    mode: Annotated[str, typer.Option(help="auto | direct | section | vote. auto decides from the input's shape.")] = "auto",
    votes: Annotated[int, typer.Option(help="Vote branches in vote mode.")] = 5,
    min_votes: Annotated[Optional[int], typer.Option(help="Votes an answer needs (default: a strict majority).")] = None,
    red_team: Annotated[bool, typer.Option("--red-team", help="Add a branch that argues against the leading answer (never votes).")] = False,
    thread: Annotated[Optional[str], typer.Option(help="Thread id for the checkpoint (default: a new one).")] = None,
    playbook: Annotated[str, typer.Option(help="Playbook whose lessons go into branch prompts.")] = "default",
    tenant: Tenant = "default",
    concurrency: Annotated[int, typer.Option(help="Most model calls in flight at once.")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the table.")] = False,
) -> None:
    """Run one task: route it, fan out branches in parallel, merge one validated answer."""
    if mode not in MODES:
        fail(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    if votes < 1:
        fail(f"--votes must be at least 1, got {votes}")
    if min_votes is not None and not 1 <= min_votes <= votes:
        fail(f"--min-votes must be between 1 and --votes ({votes}), got {min_votes}")
    if concurrency < 1:
        fail(f"--concurrency must be at least 1, got {concurrency}")
    checked_tenant(tenant)
    task = read_task(text, input_file)
    payload = {"task": task, "question": question, "mode": mode, "votes": votes, "red_team": red_team,
               "playbook": playbook, "tenant": tenant}
    if min_votes is not None:
        payload["min_votes"] = min_votes
    _check_input(payload)
    thread_id = thread or uuid.uuid4().hex
    _finish(payload, thread_id, concurrency, as_json)


def _check_input(payload: dict) -> None:
    """The graph's own input checks, run before the checkpoint file is touched (nothing written)."""
    from nodes.route import InvalidInput, validate
    from state.context import Context

    try:
        validate(payload, Context())
    except InvalidInput as exc:
        fail(str(exc))
    if payload["playbook"] != "default":  # a typo'd --playbook must not quietly run with no lessons
        from parallax.cli_playbook import open_store, require_known
        from prompts.playbook_store import PlaybookError

        async def known() -> None:
            async with open_store(write=False, tenant=payload["tenant"]) as playbooks:
                await require_known(playbooks, payload["playbook"])
        try:
            asyncio.run(known())
        except PlaybookError as exc:
            fail(str(exc))


def _finish(payload: dict | None, thread_id: str, concurrency: int, as_json: bool) -> None:
    """Run or resume, then print the result as JSON or as a table; exit 1 if the run failed."""
    try:
        result = asyncio.run(_run(payload, thread_id, concurrency, show_progress=not as_json and err.is_terminal))
    except KeyboardInterrupt:
        fail(f"interrupted; finished branches are checkpointed: parallax resume {thread_id}", code=130)
    result = {**result, "thread_id": thread_id}
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        console = Console()
        console.print(branch_table(result.get("branches", [])))
        if result.get("votes"):
            shown = (f"{k[:40] + '…' if len(k) > 40 else k!r}: {v}" for k, v in result["votes"].items())
            console.print("votes: " + ", ".join(shown), highlight=False)
        if result.get("objection"):
            console.print(f"red team: {result['objection']}")
        console.print(f"[bold]{result.get('status')}[/] ({result.get('mode')}, confidence {result.get('confidence')})"
                      + (f" - {result['reason']}" if result.get("reason") else ""))
        console.print(f"trace {result.get('trace_id')}  thread {thread_id}  playbook v{result.get('playbook_version')}")
        console.print(result.get("answer") or "(no answer)", highlight=False)
    raise typer.Exit(1 if result.get("status") == "failed" else 0)


@app.command()
def resume(
    thread_id: Annotated[str, typer.Argument(help="Thread id of a run that was interrupted or killed.")],
    concurrency: Annotated[int, typer.Option(help="Most model calls in flight at once.")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the table.")] = False,
) -> None:
    """Continue a run from its SQLite checkpoint; branches that had finished are not run again."""
    if concurrency < 1:
        fail(f"--concurrency must be at least 1, got {concurrency}")
    settings = settings_mod.load()
    if not settings.checkpoint_path.is_file():
        fail(f"no checkpoints under {settings.home}: run from the folder of the original run, or set PARALLAX_HOME")
    _finish(None, thread_id, concurrency, as_json)


@model_app.command("serve")
def model_serve(
    port: Annotated[Optional[int], typer.Option(help="Port on 127.0.0.1 (default: a free one).")] = None,
) -> None:
    """Run the embedded model server in the foreground; other Parallax processes find and reuse it."""
    from parallax.local_model import ModelServerError, serve_forever

    try:
        serve_forever(settings_mod.load(), port=port)
    except ModelServerError as exc:
        fail(str(exc), code=1)


def main() -> None:  # pragma: no cover - console script entry
    app()


def _register() -> None:
    """Commands that live in their own modules (they import from this one)."""
    from parallax import cli_learn, cli_trace
    from parallax.cli_playbook import playbook_app

    app.command("learn")(cli_learn.learn)
    app.command("eval")(cli_learn.evaluate_command)
    app.command("trace")(cli_trace.trace)
    app.add_typer(playbook_app, name="playbook")
    app.add_typer(cli_trace.dlq_app, name="dlq")


_register()
