"""`parallax run` and `parallax resume`: one task through the solve or plan graph, in SQLite.

A killed run continues with `resume`. Exit codes: 0 ok or needs_review, 1 the run failed, 2 bad
input (docs/cli.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from parallax.cli.common import (
    EarlyStop,
    MaxCost,
    MaxTokens,
    Tenant,
    as_option,
    base_context,
    checked_options,
    checked_tenant,
    durable_graph,
    err,
    fail,
    graph_failures,
    require_known,
    with_playbooks,
)
from parallax.cli.endpoint import BaseUrl, Model, use_endpoint
from parallax.cli.model_notice import print_model_notice
from parallax.cli.progress import Progress, plan_tree
from parallax.cli.tables import elide, new_table
from parallax.logic.spend import cost_text
from parallax.runtime import settings as settings_mod
from parallax.state.context import Context

if TYPE_CHECKING:
    from langgraph.graph import StateGraph
from parallax.state.plan import PlanOutput
from parallax.state.solve import SolveOutput
from parallax.state.vocabulary import RUN_MODES

RUN_OPTIONS = {
    "votes": "--votes",
    "min_votes": "--min-votes",
    "candidates": "--candidates",
    "check_file": "--check-file",
    "max_replans": "--max-replans",
    "max_cost": "--max-cost",
    "max_tokens": "--max-tokens",
    "playbook": "--playbook",
    "tenant": "--tenant",
    "target": "--target",
    "test_command": "--test-command",
    "question": "--question",
    "context.max_concurrency": "--concurrency",
    "context.early_stop": "--early-stop",
}
"""The option of `run` (and `resume`) that sets each input field or run setting a refusal may name.
"""
OPTION_NAMES = {
    **RUN_OPTIONS,
    "mode": "--mode",
    "check": "--check",
    "repo": "--repo",
    "schema": "--schema",
}
"""How `run` names each option a refusal of logic/run_options.py names."""
OUTPUT_KEYS = {
    "solve": tuple(SolveOutput.__annotations__),
    "plan": tuple(PlanOutput.__annotations__),
}
GRAPH_KEY = "parallax_graph"
"""Checkpoint metadata naming the graph of a thread, so `resume` continues it with the same graph.
"""


def read_task(text: str | None, input_file: Path | None) -> tuple[str, list[str] | None]:
    """The task text, and a PDF's page texts (page 1 first) when --input-file is one, else None."""
    from parallax.runtime.documents import DocumentError, read_document

    if text is not None and input_file is not None:
        fail("give the task as TEXT or --input-file, not both")
    pages = None
    if input_file is not None:
        stdin = str(input_file) == "-"
        if not stdin and not input_file.is_file():
            fail(f"input file not found: {input_file}")
        try:
            document = (
                read_document(sys.stdin.buffer.read()) if stdin else read_document(input_file)
            )
        except DocumentError as exc:
            fail(str(exc))
        text, pages = document.text, list(document.pages) if document.paged else None
    if text is None:
        fail("no task: give TEXT, or --input-file FILE (use - for stdin)")
    if not text.strip():
        fail("the task is empty: give some text to work on")
    return text, pages


def load_schema(spec: str) -> dict[str, Any]:
    """The JSON Schema `--schema` names: a JSON file, or `package.module:Model` (a pydantic model
    class, imported with the working folder on the path, as uvicorn imports an app)."""
    path = Path(spec)
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            fail(f"--schema {spec}: not UTF-8 text; give a JSON Schema file")
        except json.JSONDecodeError as exc:
            fail(f"--schema {spec}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})")
        if not isinstance(loaded, dict):
            fail(
                f"--schema {spec}: a JSON Schema is an object, this file holds"
                f" {type(loaded).__name__}"
            )
        return loaded
    module_name, _, attribute = spec.partition(":")
    if not attribute or not module_name:
        fail(f"--schema {spec}: no such file; give a JSON Schema file or package.module:Model")
    import importlib

    from pydantic import BaseModel

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        model = getattr(importlib.import_module(module_name), attribute)
    except ImportError as exc:
        fail(
            f"--schema {spec}: cannot import {module_name} ({exc}); run from the folder that"
            " holds it"
        )
    except AttributeError:
        fail(f"--schema {spec}: {module_name} has no {attribute}")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        fail(f"--schema {spec}: {attribute} is not a pydantic model class")
    return model.model_json_schema()


def branch_table(branches: list[dict[str, Any]]) -> Table:
    """One row per branch; `tries` counts attempts and re-asks; the vote, error or output elided to
    80 characters."""
    table = new_table(
        "branches",
        ("id", "status", "ms", "tokens", "USD", "tries", "vote / output"),
        text=("vote / output",),
    )
    for b in branches:
        shown = b.get("vote") or b.get("error") or json.dumps(b.get("output"), ensure_ascii=False)
        cost = b.get("cost_usd")
        table.add_row(
            b["id"],
            b["status"],
            f"{b['latency_ms']:.0f}",
            str(b["tokens"]["total"]),
            "?" if cost is None and b["tokens"]["total"] else f"{cost or 0:.6f}",
            str(b["attempts"] + b["reasks"]),
            elide(shown, 80),
        )
    return table


async def graph_of_thread(thread_id: str) -> str:
    """Which graph a checkpointed thread ran ("solve" for threads from before plan mode)."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(settings_mod.load().checkpoint_path)) as saver:
        found = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
    return str((found.metadata or {}).get(GRAPH_KEY, "solve")) if found else "solve"


async def run_graph(
    name: str, payload: dict[str, Any] | None, thread_id: str, context: Context, show_progress: bool
) -> dict[str, Any]:
    """Run (or, with `payload=None`, resume) the `name` graph ("solve" or "plan") on a checkpointed
    thread."""
    from parallax.logic.routing import InvalidInput

    builder: StateGraph[Any, Any, Any, Any]
    if name == "plan":
        from parallax.graphs.plan import builder as plan_builder

        builder = plan_builder
    else:
        from parallax.graphs.solve import builder as solve_builder

        builder = solve_builder
    keys = OUTPUT_KEYS[name]
    config = {"configurable": {"thread_id": thread_id}, "metadata": {GRAPH_KEY: name}}
    result: dict[str, Any] = {}
    with graph_failures(InvalidInput):
        async with durable_graph(builder) as graph:
            if payload is None:
                snapshot = await graph.aget_state(config)
                if not snapshot.values:
                    fail(
                        f"no run with thread id {thread_id!r}: searched"
                        f" {settings_mod.load().checkpoint_path} (set PARALLAX_HOME to the home of"
                        " the original run)"
                    )
                result = {k: v for k, v in snapshot.values.items() if k in keys}
                if not snapshot.next:  # finished already: report it, run nothing
                    return result
            live = (
                Live(console=err, transient=True, refresh_per_second=4)
                if show_progress and name == "plan"
                else None
            )
            with (
                err.status("routing…" if payload else "resuming…") as status,
                live or nullcontext(),
            ):
                progress = Progress(status, live)
                async for mode, chunk in graph.astream(
                    payload,
                    config,
                    context=context,
                    durability="sync",
                    stream_mode=["updates", "values", "custom"],
                ):
                    if mode == "values":
                        result = {k: v for k, v in chunk.items() if k in keys}
                    elif mode == "custom" and isinstance(chunk, dict) and "plan_task" in chunk:
                        progress.task(chunk["plan_task"])
                    elif mode == "updates" and show_progress:
                        for node, update in chunk.items():
                            progress.update(node, update or {})
    return result


def run(
    cli: typer.Context,
    text: Annotated[str | None, typer.Argument(help="The task text (or use --input-file).")] = None,
    question: Annotated[
        str,
        typer.Option(
            "--question",
            "-q",
            help="Question about the text (section mode asks it of every slice).",
        ),
    ] = "",
    input_file: Annotated[
        Path | None,
        typer.Option(
            "--input-file",
            "-f",
            help="Read the task from a file: PDF (pages kept), DOCX, HTML, "
            "Markdown or UTF-8 text ('-' for stdin).",
        ),
    ] = None,
    mode: Annotated[
        str,
        typer.Option(
            help=f"{' | '.join(RUN_MODES)}. auto decides from the "
            "input's shape (several deliverables or steps: plan; write a function, fix, "
            "draft: speculate)."
        ),
    ] = "auto",
    votes: Annotated[
        int,
        typer.Option(
            help="Most vote branches in vote mode (with early stopping, fewer once the "
            "answer is settled)."
        ),
    ] = 5,
    early_stop: EarlyStop = None,
    min_votes: Annotated[
        int | None, typer.Option(help="Votes an answer needs (default: a strict majority).")
    ] = None,
    candidates: Annotated[
        int | None,
        typer.Option(
            help=(
                "Speculate mode: candidates made at once, each with its own approach (a prompt"
                " variant and a temperature; "
                "default 3). Plan mode with --repo and --test-command: candidate patches per edit"
                " task, the first whose "
                "tests pass is merged (default 1)."
            )
        ),
    ] = None,
    check: Annotated[
        str | None,
        typer.Option(
            help=(
                "Speculate mode: a command that checks a candidate, run in the candidate's own"
                " folder with its answer "
                "saved there as --check-file (exit 0 passes; pytest's 'N passed' is counted). The"
                " first candidate that "
                "passes wins and the others are cancelled. Without a check, a judge compares"
                " candidates pairwise, "
                "both ways round."
            )
        ),
    ] = None,
    check_file: Annotated[
        str | None,
        typer.Option(
            help=(
                "Speculate mode: the file a candidate's answer is saved as, in its folder (default"
                " candidate.txt)."
            )
        ),
    ] = None,
    red_team: Annotated[
        bool,
        typer.Option(
            "--red-team", help="Add a branch that argues against the leading answer (never votes)."
        ),
    ] = False,
    thread: Annotated[
        str | None, typer.Option(help="Thread id for the checkpoint (default: a new one).")
    ] = None,
    playbook: Annotated[
        str, typer.Option(help="Playbook whose lessons go into branch prompts.")
    ] = "default",
    tenant: Tenant = "default",
    concurrency: Annotated[
        int, typer.Option(help="Most model calls (plan: tasks) in flight at once.")
    ] = 8,
    repo: Annotated[
        Path | None,
        typer.Option(
            help="Plan mode: a git repository that edit tasks change, each in its "
            "own worktree and branch; merged into a new integration branch. "
            "Speculate mode with --check: each candidate is checked in its own "
            "worktree of the repository's HEAD."
        ),
    ] = None,
    test_command: Annotated[
        str, typer.Option(help="Plan mode with --repo: the test command edit tasks may run.")
    ] = "",
    max_replans: Annotated[
        int, typer.Option(help="Plan mode: new plans the joiner may ask for.")
    ] = 1,
    target: Annotated[
        str | None,
        typer.Option(
            help="The right answer, if you know it: the trace keeps whether the "
            "run got it (accuracy in `parallax stats`)."
        ),
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            help=(
                "The shape of the answer: a JSON Schema file, or package.module:Model (a pydantic"
                " model). "
                "Branches are asked for that object, votes count field by field, section values"
                " need a "
                "quote from their slice; --json gives `data` and `provenance`."
            ),
        ),
    ] = None,
    max_cost: MaxCost = None,
    max_tokens: MaxTokens = None,
    model: Model = None,
    base_url: BaseUrl = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of the table.")
    ] = False,
) -> None:
    """Run one task: route it, fan out branches in parallel, merge one validated answer (or plan it
    as a DAG of tasks)."""
    from parallax.logic.run_options import (
        RunOptions,
        check_options,
        check_schema_options,
        graph_input,
    )

    use_endpoint(cli, model, base_url)

    if mode not in RUN_MODES:
        fail(f"unknown mode {mode!r}: use one of {', '.join(RUN_MODES)}")
    with refusals():
        check_options(mode, check, check_file, repo, OPTION_NAMES)
    checked_tenant(tenant)
    task, pages = read_task(text, input_file)
    output_schema = None
    if schema is not None:
        with refusals():
            check_schema_options(mode, repo, OPTION_NAMES)
        output_schema = load_schema(schema)
    options = RunOptions(
        task,
        question,
        mode,
        votes,
        red_team,
        playbook,
        tenant,
        pages,
        min_votes,
        candidates,
        check,
        check_file,
        repo,
        test_command,
        max_replans,
        target,
        max_cost,
        max_tokens,
        output_schema,
    )
    with refusals():
        name, payload = graph_input(options, OPTION_NAMES)
    context = base_context(cli, max_concurrency=concurrency, early_stop=early_stop)
    _check_input(payload, name, context)
    thread_id = thread or uuid.uuid4().hex
    _finish(name, payload, thread_id, context, as_json)


@contextmanager
def refusals() -> Iterator[None]:
    """A refusal of logic/run_options.py as the command's one line, exit 2."""
    from parallax.logic.run_input import RunInputError

    try:
        yield
    except RunInputError as exc:
        fail(str(exc))


def _check_input(payload: dict[str, Any], name: str, context: Context) -> None:
    """The graph's own input checks (logic/run_input.py, as every face runs them: the run's options
    too), before the checkpoint file is touched (nothing written); a refusal names the option at
    fault (--votes, not votes).
    """
    from parallax.logic.run_input import RunInputError, check_run_input
    from parallax.logic.run_options import check_repository

    try:
        check_run_input(name, payload, context)
    except RunInputError as exc:
        fail(as_option(exc, RUN_OPTIONS))
    if payload.get("repo"):
        with refusals():
            check_repository(payload["repo"], OPTION_NAMES)
    if payload["playbook"] != "default":  # a typo'd --playbook must not quietly run with no lessons
        with_playbooks(
            lambda playbooks: require_known(playbooks, payload["playbook"]), payload["tenant"]
        )


def _print_result(result: dict[str, Any]) -> None:
    console = Console()
    if result.get("plan"):
        _print_plan(console, result)
    else:
        console.print(branch_table(result.get("branches", [])))
    _print_votes(console, result)
    guess = (
        result.get("status") == "needs_review"
        and result.get("data") is None
        and bool(result.get("answer"))
    )
    _print_status(console, result, guess)
    _print_answer(console, result, guess)


def _print_plan(console: Console, result: dict[str, Any]) -> None:
    """The last round's plan as a tree, then what its verification found and what was merged."""
    statuses = {
        t["id"]: t
        for t in result.get("tasks", [])
        if t["round"] == max(r["round"] for r in result["tasks"])
    }
    console.print(plan_tree(result["plan"], statuses))
    layers = result.get("verification") or {}
    facts, semantics = layers.get("facts") or {}, layers.get("semantics") or {}
    if facts.get("checked"):
        console.print(
            f"facts: {facts['verified']} of {facts['checked']} findings quote their source",
            highlight=False,
        )
    if semantics.get("flagged"):
        console.print(
            f"semantics: {len(semantics['flagged'])} contradicting pair(s) of findings",
            highlight=False,
        )
    merge = layers.get("merge")
    if merge:
        console.print(
            f"merged into {merge['integration_branch']}: tasks {merge['merged'] or 'none'}; "
            f"conflicts: {[c['task'] for c in merge['conflicts']] or 'none'}",
            highlight=False,
        )


def _print_votes(console: Console, result: dict[str, Any]) -> None:
    """How the answer was chosen: the speculation's candidates, the votes asked and counted, the
    red team's word."""
    speculation = (result.get("verification") or {}).get("speculation")
    if speculation:
        from parallax.cli.trace import speculation_table

        console.print(speculation_table(speculation))
    if result.get("votes_asked"):
        stop = (
            f" ({result['stop_reason']})" if result.get("stop_reason") else ""
        )  # "(the most allowed)", ...
        console.print(f"votes asked: {result['votes_asked']}{stop}", highlight=False)
    if result.get("vote_counts"):
        shown = (
            f"{elide(k, 40) if len(k) > 40 else repr(k)}: {v}"
            for k, v in result["vote_counts"].items()
        )
        console.print("votes: " + ", ".join(shown), highlight=False)
    if result.get("objection"):
        console.print(f"red team: {result['objection']}")


def _print_status(console: Console, result: dict[str, Any], guess: bool) -> None:
    """The run's status, confidence and why (unless a leading guess), trace, spend and thread."""
    console.print(
        f"[bold]{result.get('status')}[/] ({result.get('mode')}, "
        f"confidence {result.get('confidence')})"
        + (f" - {result['reason']}" if result.get("reason") and not guess else "")
    )
    console.print(f"trace {result.get('trace_id')}", highlight=False)
    if result.get("spend"):
        console.print(
            f"spent {result['spend']['tokens']} tokens, {cost_text(result['spend'])}",
            highlight=False,
        )
    console.print(
        f"thread {result['thread_id']}  playbook v{result.get('playbook_version')}", highlight=False
    )


def _print_answer(console: Console, result: dict[str, Any], guess: bool) -> None:
    """The answer: its data and what of it is verified, a leading guess said as one, or its text."""
    if result.get("data") is not None:
        console.print_json(data=result["data"])
        provenance = result.get("provenance") or []
        verified = sum(1 for p in provenance if p.get("verified"))
        console.print(
            f"provenance: {verified} of {len(provenance)} values verified (--json lists each, "
            "with its quote and page)",
            highlight=False,
        )
    elif guess:
        console.print(leading_guess(result), highlight=False)
    else:
        console.print(result.get("answer") or "(no answer)", highlight=False)


def leading_guess(result: dict[str, Any]) -> str:
    """A `needs_review` answer as what it is: the leading guess, its support among the votes, and
    why it needs review. Printed bare, it read as Parallax's answer (the embedded model's junk on
    the README's first command).
    """
    from parallax.logic.vote import final_value

    counts = result.get("vote_counts") or {}
    votes = counts.get(final_value(result["answer"])) if counts else None
    support = f" ({votes} of {sum(counts.values())} votes)" if votes is not None else ""
    return f"leading guess{support}: {result['answer']} — needs review" + (
        f": {result['reason']}" if result.get("reason") else ""
    )


def _finish(
    name: str | None,
    payload: dict[str, Any] | None,
    thread_id: str,
    context: Context,
    as_json: bool,
) -> None:
    """Run or resume, then print the result as JSON or as a table; exit 1 if the run failed."""
    try:
        if name is None:
            name = asyncio.run(graph_of_thread(thread_id))
        result = asyncio.run(
            run_graph(
                name, payload, thread_id, context, show_progress=not as_json and err.is_terminal
            )
        )
    except KeyboardInterrupt:
        fail(
            f"interrupted; finished branches are checkpointed: parallax resume {thread_id}",
            code=130,
        )
    from parallax.runtime.model_server import peak_rss_mb, server_process

    result = {
        **result,
        "thread_id": thread_id,
        "resources": {"peak_rss_mb": peak_rss_mb(), "model_server": server_process()},
    }
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        _print_result(result)
    print_model_notice(context)
    raise typer.Exit(1 if result.get("status") == "failed" else 0)


def resume(
    cli: typer.Context,
    thread_id: Annotated[
        str, typer.Argument(help="Thread id of a run that was interrupted or killed.")
    ],
    concurrency: Annotated[
        int, typer.Option(help="Most model calls (plan: tasks) in flight at once.")
    ] = 8,
    model: Model = None,
    base_url: BaseUrl = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of the table.")
    ] = False,
) -> None:
    """Continue a run from its SQLite checkpoint; branches and plan tasks that had finished are not
    run again."""
    use_endpoint(cli, model, base_url)
    context = checked_options(base_context(cli, max_concurrency=concurrency), RUN_OPTIONS)
    settings = settings_mod.load()
    if not settings.checkpoint_path.is_file():
        fail(
            f"no run with thread id {thread_id!r}: searched {settings.checkpoint_path}, which does"
            " not exist (set PARALLAX_HOME to the home of the original run)"
        )
    _finish(None, None, thread_id, context, as_json)
