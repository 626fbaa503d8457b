"""`parallax run` and `parallax resume`: one task through the solve graph, checkpointed in SQLite.

`run` validates everything before the checkpoint file is touched, shows the branches as
they finish, and prints one object with `--json`. A run whose process died (even SIGKILL)
continues with `resume`; branches that had finished are not called again.

Exit codes: 0 ok or needs_review, 1 the run failed, 2 bad input (one line, nothing written).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from parallax.cli.common import (
    MODES,
    Tenant,
    base_context,
    checked_tenant,
    durable_graph,
    err,
    fail,
    new_table,
    require_known,
    with_playbooks,
)
from parallax.runtime import settings as settings_mod
from parallax.state.context import Context
from parallax.state.solve import SolveOutput

OUTPUT_KEYS = tuple(SolveOutput.__annotations__)


def read_task(text: str | None, input_file: Path | None) -> str:
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


def branch_table(branches: list[dict]) -> Table:
    table = new_table("branches", ("id", "kind", "status", "latency", "tokens", "attempts", "vote / output"))
    for b in branches:
        shown = (b.get("vote") or b.get("error") or json.dumps(b.get("output")))[:60]
        table.add_row(b["id"], b["kind"], b["status"], f"{b['latency_ms']:.0f} ms", str(b["tokens"]["total"]),
                      str(b["attempts"] + b["reasks"]), shown)
    return table


async def run_solve(payload: dict | None, thread_id: str, context: Context, show_progress: bool) -> dict:
    """Run (or, with `payload=None`, resume) the solve graph on a checkpointed thread."""
    from parallax.graphs.solve import builder
    from parallax.logic.routing import InvalidInput
    from parallax.runtime.model_server import ModelServerError

    config = {"configurable": {"thread_id": thread_id}}
    result: dict = {}
    done = 0
    try:
        async with durable_graph(builder) as graph:
            if payload is None:
                snapshot = await graph.aget_state(config)
                if not snapshot.values:
                    fail(f"no run with thread id {thread_id!r} under {settings_mod.load().home} (check PARALLAX_HOME)")
                result = {k: v for k, v in snapshot.values.items() if k in OUTPUT_KEYS}
                if not snapshot.next:  # finished already: report it, run nothing
                    return result
            with err.status("routing…" if payload else "resuming…") as status:
                async for mode, chunk in graph.astream(payload, config, context=context, durability="sync",
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


def run(
    cli: typer.Context,
    text: Annotated[str | None, typer.Argument(help="The task text (or use --input-file).")] = None,
    question: Annotated[str, typer.Option("--question", "-q",
                                          help="Question about the text (section mode asks it of every slice).")] = "",
    input_file: Annotated[Path | None, typer.Option("--input-file", "-f",
                                                    help="Read the task from a UTF-8 file ('-' for stdin).")] = None,
    mode: Annotated[str, typer.Option(help="auto | direct | section | vote. auto decides from the input's shape.")] = "auto",
    votes: Annotated[int, typer.Option(help="Vote branches in vote mode.")] = 5,
    min_votes: Annotated[int | None, typer.Option(help="Votes an answer needs (default: a strict majority).")] = None,
    red_team: Annotated[bool, typer.Option("--red-team",
                                           help="Add a branch that argues against the leading answer (never votes).")] = False,
    thread: Annotated[str | None, typer.Option(help="Thread id for the checkpoint (default: a new one).")] = None,
    playbook: Annotated[str, typer.Option(help="Playbook whose lessons go into branch prompts.")] = "default",
    tenant: Tenant = "default",
    concurrency: Annotated[int, typer.Option(help="Most model calls in flight at once.")] = 8,
    target: Annotated[str | None, typer.Option(help="The right answer, if you know it: the trace keeps whether the "
                                                     "run got it (accuracy in `parallax stats`).")] = None,
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
    if target is not None:
        payload["target"] = target
    _check_input(payload)
    thread_id = thread or uuid.uuid4().hex
    _finish(payload, thread_id, base_context(cli, max_concurrency=concurrency), as_json)


def _check_input(payload: dict) -> None:
    """The graph's own input checks, run before the checkpoint file is touched (nothing written)."""
    from parallax.logic.routing import InvalidInput, validate
    from parallax.runtime.run_context import resolved

    try:
        validate(payload, resolved())
    except InvalidInput as exc:
        fail(str(exc))
    if payload["playbook"] != "default":  # a typo'd --playbook must not quietly run with no lessons
        with_playbooks(lambda playbooks: require_known(playbooks, payload["playbook"]), payload["tenant"])


def _finish(payload: dict | None, thread_id: str, context: Context, as_json: bool) -> None:
    """Run or resume, then print the result as JSON or as a table; exit 1 if the run failed."""
    try:
        result = asyncio.run(run_solve(payload, thread_id, context, show_progress=not as_json and err.is_terminal))
    except KeyboardInterrupt:
        fail(f"interrupted; finished branches are checkpointed: parallax resume {thread_id}", code=130)
    from parallax.runtime.model_server import peak_rss_mb, server_process

    result = {**result, "thread_id": thread_id,
              "resources": {"peak_rss_mb": peak_rss_mb(), "model_server": server_process()}}
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


def resume(
    cli: typer.Context,
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
    _finish(None, thread_id, base_context(cli, max_concurrency=concurrency), as_json)
