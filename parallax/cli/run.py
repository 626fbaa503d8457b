"""`parallax run` and `parallax resume`: one task through the solve or plan graph, checkpointed in SQLite.

`run` validates everything before the checkpoint file is touched, shows the branches as
they finish (a plan run: its DAG as a tree with live per-task status), and prints one
object with `--json`. `--mode plan`, `--repo`, or `auto` on a request with several steps
runs the plan graph. A run whose process died (even SIGKILL) continues with `resume`;
branches and plan tasks that had finished are not called again.

Exit codes: 0 ok or needs_review, 1 the run failed, 2 bad input (one line, nothing written).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.tree import Tree

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
from parallax.cli.tables import elide, new_table
from parallax.logic.spend import cost_text
from parallax.runtime import settings as settings_mod
from parallax.state.context import Context

if TYPE_CHECKING:
    from langgraph.graph import StateGraph
    from rich.status import Status
from parallax.state.plan import PlanOutput
from parallax.state.solve import SolveOutput
from parallax.state.vocabulary import BUSINESS_ROUTES, RUN_MODES, listed

RUN_OPTIONS = {"votes": "--votes", "min_votes": "--min-votes", "candidates": "--candidates", "check_file": "--check-file",
               "max_replans": "--max-replans", "max_cost": "--max-cost", "max_tokens": "--max-tokens",
               "playbook": "--playbook", "tenant": "--tenant", "target": "--target", "test_command": "--test-command",
               "question": "--question", "context.max_concurrency": "--concurrency", "context.early_stop": "--early-stop"}
"""The option of `run` (and `resume`) that sets each input field or run setting a refusal may name."""
OUTPUT_KEYS = {"solve": tuple(SolveOutput.__annotations__), "plan": tuple(PlanOutput.__annotations__)}
GRAPH_KEY = "parallax_graph"
"""Checkpoint metadata naming the graph of a thread, so `resume` continues it with the same graph."""
STATUS_STYLE = {"PENDING": "dim", "RUNNING": "yellow", "DONE": "green", "NEEDS_REVIEW": "magenta", "FAILED": "red",
                "SKIPPED": "red dim"}


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
            document = read_document(sys.stdin.buffer.read()) if stdin else read_document(input_file)
        except DocumentError as exc:
            fail(str(exc))
        text, pages = document.text, list(document.pages) if document.paged else None
    if text is None:
        fail("no task: give TEXT, or --input-file FILE (use - for stdin)")
    if not text.strip():
        fail("the task is empty: give some text to work on")
    return text, pages


def load_schema(spec: str) -> dict[str, Any]:
    """The JSON Schema `--schema` names: a JSON file, or `package.module:Model` (a pydantic model class,
    imported with the working folder on the path, as uvicorn imports an app)."""
    path = Path(spec)
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            fail(f"--schema {spec}: not UTF-8 text; give a JSON Schema file")
        except json.JSONDecodeError as exc:
            fail(f"--schema {spec}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})")
        if not isinstance(loaded, dict):
            fail(f"--schema {spec}: a JSON Schema is an object, this file holds {type(loaded).__name__}")
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
        fail(f"--schema {spec}: cannot import {module_name} ({exc}); run from the folder that holds it")
    except AttributeError:
        fail(f"--schema {spec}: {module_name} has no {attribute}")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        fail(f"--schema {spec}: {attribute} is not a pydantic model class")
    return model.model_json_schema()


def branch_table(branches: list[dict[str, Any]]) -> Table:
    """One row per branch; `tries` counts attempts and re-asks; the vote, error or output elided to 80 characters."""
    table = new_table("branches", ("id", "status", "ms", "tokens", "USD", "tries", "vote / output"),
                      text=("vote / output",))
    for b in branches:
        shown = b.get("vote") or b.get("error") or json.dumps(b.get("output"), ensure_ascii=False)
        cost = b.get("cost_usd")
        table.add_row(b["id"], b["status"], f"{b['latency_ms']:.0f}", str(b["tokens"]["total"]),
                      "?" if cost is None and b["tokens"]["total"] else f"{cost or 0:.6f}",
                      str(b["attempts"] + b["reasks"]), elide(shown, 80))
    return table


def plan_tree(plan: dict[str, Any], statuses: dict[int, dict[str, Any]], title: str = "plan") -> Tree:
    """The plan as a tree: each task under the last of its dependencies, with its status (and why)."""
    from rich.markup import escape

    tree = Tree(f"[bold]{title}[/] ({plan.get('synthesis', 'concat')})")
    nodes: dict[int, Tree] = {}
    for task in plan["tasks"]:
        seen = statuses.get(task["id"], {})
        status = seen.get("status", "PENDING")
        deps = task.get("deps", [])
        label = (f"[{STATUS_STYLE.get(status, '')}]{status}[/] {task['id']} {task.get('kind', 'solve')}: "
                 f"{escape(elide(task['goal'], 70))}" + (f" [dim](after {', '.join(map(str, deps))})[/]" if deps else "")
                 + (f" [dim]- {escape(elide(seen['reason'], 80))}[/]" if seen.get("reason") and status in ("FAILED", "SKIPPED")
                    else ""))
        known = [d for d in deps if d in nodes]
        parent = nodes[max(known)] if known else tree
        nodes[task["id"]] = parent.add(label)
    return tree


class Progress:
    """What a run shows on stderr while it works: branch counts, or the plan's live tree."""

    def __init__(self, status: Status, live: Live | None) -> None:
        self.status, self.live, self.done = status, live, 0
        self.plan: dict[str, Any] | None = None
        self.tasks: dict[int, dict[str, Any]] = {}
        self.round = 0

    def update(self, node: str, update: dict[str, Any]) -> None:
        if node == "route":
            err.print(f"route: [bold]{update['mode']}[/]" + (f" ({len(update['slices'])} slices)" if update["slices"] else ""))
        if node == "make_plan" and update.get("plan"):
            self.plan, self.tasks, self.round = update["plan"], {}, update.get("round", self.round)
            self._redraw()
        from langgraph.types import Overwrite

        branches = update.get("branches") or []
        for record in branches.value if isinstance(branches, Overwrite) else branches:  # route starts a run empty
            self.done += 1
            self.status.update(f"{self.done} branches done (last: {record['kind']} {record['status']})")

    def task(self, event: dict[str, Any]) -> None:
        if event.get("round", 0) == self.round:
            self.tasks[event["id"]] = event
            self._redraw()

    def _redraw(self) -> None:
        if self.live is not None and self.plan is not None:
            self.live.update(plan_tree(self.plan, self.tasks, f"plan (round {self.round})"))


async def graph_of_thread(thread_id: str) -> str:
    """Which graph a checkpointed thread ran ("solve" for threads from before plan mode)."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(settings_mod.load().checkpoint_path)) as saver:
        found = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
    return str((found.metadata or {}).get(GRAPH_KEY, "solve")) if found else "solve"


async def run_graph(
    name: str, payload: dict[str, Any] | None, thread_id: str, context: Context, show_progress: bool
) -> dict[str, Any]:
    """Run (or, with `payload=None`, resume) the `name` graph ("solve" or "plan") on a checkpointed thread."""
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
                    fail(f"no run with thread id {thread_id!r}: searched {settings_mod.load().checkpoint_path} "
                         "(set PARALLAX_HOME to the home of the original run)")
                result = {k: v for k, v in snapshot.values.items() if k in keys}
                if not snapshot.next:  # finished already: report it, run nothing
                    return result
            live = Live(console=err, transient=True, refresh_per_second=4) if show_progress and name == "plan" else None
            with err.status("routing…" if payload else "resuming…") as status, live or nullcontext():
                progress = Progress(status, live)
                async for mode, chunk in graph.astream(payload, config, context=context, durability="sync",
                                                       stream_mode=["updates", "values", "custom"]):
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
    question: Annotated[str, typer.Option("--question", "-q",
                                          help="Question about the text (section mode asks it of every slice).")] = "",
    input_file: Annotated[Path | None, typer.Option("--input-file", "-f",
                                                    help="Read the task from a file: PDF (pages kept), DOCX, HTML, "
                                                         "Markdown or UTF-8 text ('-' for stdin).")] = None,
    mode: Annotated[str, typer.Option(help=f"{' | '.join(RUN_MODES)}. auto decides from the "
                                           "input's shape (several deliverables or steps: plan; write a function, fix, "
                                           "draft: speculate).")] = "auto",
    votes: Annotated[int, typer.Option(help="Most vote branches in vote mode (with early stopping, fewer once the "
                                            "answer is settled).")] = 5,
    early_stop: EarlyStop = None,
    min_votes: Annotated[int | None, typer.Option(help="Votes an answer needs (default: a strict majority).")] = None,
    candidates: Annotated[int | None, typer.Option(
        help="Speculate mode: candidates made at once, each with its own approach (a prompt variant and a temperature; "
             "default 3). Plan mode with --repo and --test-command: candidate patches per edit task, the first whose "
             "tests pass is merged (default 1).")] = None,
    check: Annotated[str | None, typer.Option(
        help="Speculate mode: a command that checks a candidate, run in the candidate's own folder with its answer "
             "saved there as --check-file (exit 0 passes; pytest's 'N passed' is counted). The first candidate that "
             "passes wins and the others are cancelled. Without a check, a judge compares candidates pairwise, "
             "both ways round.")] = None,
    check_file: Annotated[str | None, typer.Option(
        help="Speculate mode: the file a candidate's answer is saved as, in its folder (default candidate.txt).")] = None,
    red_team: Annotated[bool, typer.Option("--red-team",
                                           help="Add a branch that argues against the leading answer (never votes).")] = False,
    thread: Annotated[str | None, typer.Option(help="Thread id for the checkpoint (default: a new one).")] = None,
    playbook: Annotated[str, typer.Option(help="Playbook whose lessons go into branch prompts.")] = "default",
    tenant: Tenant = "default",
    concurrency: Annotated[int, typer.Option(help="Most model calls (plan: tasks) in flight at once.")] = 8,
    repo: Annotated[Path | None, typer.Option(help="Plan mode: a git repository that edit tasks change, each in its "
                                                   "own worktree and branch; merged into a new integration branch. "
                                                   "Speculate mode with --check: each candidate is checked in its own "
                                                   "worktree of the repository's HEAD.")] = None,
    test_command: Annotated[str, typer.Option(help="Plan mode with --repo: the test command edit tasks may run.")] = "",
    max_replans: Annotated[int, typer.Option(help="Plan mode: new plans the joiner may ask for.")] = 1,
    target: Annotated[str | None, typer.Option(help="The right answer, if you know it: the trace keeps whether the "
                                                     "run got it (accuracy in `parallax stats`).")] = None,
    schema: Annotated[str | None, typer.Option(
        "--schema", help="The shape of the answer: a JSON Schema file, or package.module:Model (a pydantic model). "
                         "Branches are asked for that object, votes count field by field, section values need a "
                         "quote from their slice; --json gives `data` and `provenance`.")] = None,
    max_cost: MaxCost = None,
    max_tokens: MaxTokens = None,
    model: Model = None,
    base_url: BaseUrl = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the table.")] = False,
) -> None:
    """Run one task: route it, fan out branches in parallel, merge one validated answer (or plan it as a DAG of tasks)."""
    from parallax.logic.routing import wants_plan

    use_endpoint(cli, model, base_url)

    if mode not in RUN_MODES:
        fail(f"unknown mode {mode!r}: use one of {', '.join(RUN_MODES)}")
    speculative = mode == "speculate" or (mode == "auto" and check is not None)
    if repo is not None and mode not in ("plan", "auto", "speculate"):
        fail(f"--repo needs --mode plan (edit tasks run in plan mode) or speculate with --check, not --mode {mode}")
    if repo is not None and speculative and check is None:
        fail("--repo with --mode speculate needs --check: the command run in each candidate's worktree")
    if (check is not None or check_file is not None) and not speculative:
        fail(f"--check and --check-file work with --mode speculate, not --mode {mode}")
    if repo is not None and not repo.is_dir():
        fail(f"--repo {repo}: no such folder")
    checked_tenant(tenant)
    task, pages = read_task(text, input_file)
    payload = {"task": task, "question": question, "mode": mode, "votes": votes, "red_team": red_team,
               "playbook": playbook, "tenant": tenant}
    if pages is not None:
        payload["pages"] = pages
    if speculative:
        payload.update(mode="speculate", candidates=3 if candidates is None else candidates)
        if check is not None:
            payload["check"] = check
        if check_file is not None:
            payload["check_file"] = check_file
        if repo is not None:
            payload["repo"] = str(repo.resolve())
    if min_votes is not None:
        payload["min_votes"] = min_votes
    if target is not None:
        payload["target"] = target
    if max_cost is not None:
        payload["max_cost"] = max_cost
    if max_tokens is not None:
        payload["max_tokens"] = max_tokens
    if schema is not None:
        if mode == "plan" or repo is not None:
            modes = listed(("auto", *BUSINESS_ROUTES))
            fail(f"--schema works with --mode {modes}, not plan (nor --repo)")
        payload["output_schema"] = load_schema(schema)
    plan_shaped = mode == "auto" and not speculative and schema is None and wants_plan(question or task)
    name = "plan" if mode == "plan" or (repo is not None and not speculative) or plan_shaped else "solve"
    if name == "plan":
        if (candidates or 1) > 1 and not (repo is not None and test_command) and (mode == "plan" or repo is not None):
            fail("--candidates in plan mode makes edit tasks speculative: it needs --repo and --test-command")
        payload.update(mode="plan", max_replans=max_replans, test_command=test_command)
        if candidates is not None and repo is not None:
            payload["candidates"] = candidates
        payload.pop("red_team")
        if repo is not None:
            payload["repo"] = str(repo.resolve())
    context = base_context(cli, max_concurrency=concurrency, early_stop=early_stop)
    _check_input(payload, name, context)
    thread_id = thread or uuid.uuid4().hex
    _finish(name, payload, thread_id, context, as_json)


def _check_input(payload: dict[str, Any], name: str, context: Context) -> None:
    """The graph's own input checks (logic/run_input.py, as every face runs them: the run's options too), before the
    checkpoint file is touched (nothing written); a refusal names the option at fault (--votes, not votes)."""
    from parallax.logic.run_input import RunInputError, check_run_input
    from parallax.runtime.worktrees import GitError, repository_root

    try:
        check_run_input(name, payload, context)
        if payload.get("repo"):
            repository_root(payload["repo"])
    except RunInputError as exc:
        fail(as_option(exc, RUN_OPTIONS))
    except GitError as exc:
        fail(f"--repo {payload['repo']}: {exc} (give a git repository with at least one commit)")
    if payload["playbook"] != "default":  # a typo'd --playbook must not quietly run with no lessons
        with_playbooks(lambda playbooks: require_known(playbooks, payload["playbook"]), payload["tenant"])


def _print_result(result: dict[str, Any]) -> None:
    console = Console()
    if result.get("plan"):
        statuses = {t["id"]: t for t in result.get("tasks", []) if t["round"] == max(r["round"] for r in result["tasks"])}
        console.print(plan_tree(result["plan"], statuses))
        layers = result.get("verification") or {}
        facts, semantics = layers.get("facts") or {}, layers.get("semantics") or {}
        if facts.get("checked"):
            console.print(f"facts: {facts['verified']} of {facts['checked']} findings quote their source", highlight=False)
        if semantics.get("flagged"):
            console.print(f"semantics: {len(semantics['flagged'])} contradicting pair(s) of findings", highlight=False)
        merge = layers.get("merge")
        if merge:
            console.print(f"merged into {merge['integration_branch']}: tasks {merge['merged'] or 'none'}; "
                          f"conflicts: {[c['task'] for c in merge['conflicts']] or 'none'}", highlight=False)
    else:
        console.print(branch_table(result.get("branches", [])))
    speculation = (result.get("verification") or {}).get("speculation")
    if speculation:
        from parallax.cli.trace import speculation_table

        console.print(speculation_table(speculation))
    if result.get("votes_asked"):
        stop = f" ({result['stop_reason']})" if result.get("stop_reason") else ""  # "(the most allowed)", ...
        console.print(f"votes asked: {result['votes_asked']}{stop}", highlight=False)
    if result.get("vote_counts"):
        shown = (f"{elide(k, 40) if len(k) > 40 else repr(k)}: {v}" for k, v in result["vote_counts"].items())
        console.print("votes: " + ", ".join(shown), highlight=False)
    if result.get("objection"):
        console.print(f"red team: {result['objection']}")
    guess = result.get("status") == "needs_review" and result.get("data") is None and bool(result.get("answer"))
    console.print(f"[bold]{result.get('status')}[/] ({result.get('mode')}, confidence {result.get('confidence')})"
                  + (f" - {result['reason']}" if result.get("reason") and not guess else ""))
    console.print(f"trace {result.get('trace_id')}", highlight=False)
    if result.get("spend"):
        console.print(f"spent {result['spend']['tokens']} tokens, {cost_text(result['spend'])}", highlight=False)
    console.print(f"thread {result['thread_id']}  playbook v{result.get('playbook_version')}", highlight=False)
    if result.get("data") is not None:
        console.print_json(data=result["data"])
        provenance = result.get("provenance") or []
        verified = sum(1 for p in provenance if p.get("verified"))
        console.print(f"provenance: {verified} of {len(provenance)} values verified (--json lists each, with its quote "
                      "and page)", highlight=False)
    elif guess:
        console.print(leading_guess(result), highlight=False)
    else:
        console.print(result.get("answer") or "(no answer)", highlight=False)


def leading_guess(result: dict[str, Any]) -> str:
    """A `needs_review` answer as what it is: the leading guess, its support among the votes, and why it needs
    review. Printed bare, it read as Parallax's answer (the embedded model's junk on the README's first command)."""
    from parallax.logic.vote import final_value

    counts = result.get("vote_counts") or {}
    votes = counts.get(final_value(result["answer"])) if counts else None
    support = f" ({votes} of {sum(counts.values())} votes)" if votes is not None else ""
    return (f"leading guess{support}: {result['answer']} — needs review"
            + (f": {result['reason']}" if result.get("reason") else ""))


def _finish(name: str | None, payload: dict[str, Any] | None, thread_id: str, context: Context, as_json: bool) -> None:
    """Run or resume, then print the result as JSON or as a table; exit 1 if the run failed."""
    try:
        if name is None:
            name = asyncio.run(graph_of_thread(thread_id))
        result = asyncio.run(run_graph(name, payload, thread_id, context, show_progress=not as_json and err.is_terminal))
    except KeyboardInterrupt:
        fail(f"interrupted; finished branches are checkpointed: parallax resume {thread_id}", code=130)
    from parallax.runtime.model_server import peak_rss_mb, server_process

    result = {**result, "thread_id": thread_id,
              "resources": {"peak_rss_mb": peak_rss_mb(), "model_server": server_process()}}
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        _print_result(result)
    print_model_notice(context)
    raise typer.Exit(1 if result.get("status") == "failed" else 0)


def resume(
    cli: typer.Context,
    thread_id: Annotated[str, typer.Argument(help="Thread id of a run that was interrupted or killed.")],
    concurrency: Annotated[int, typer.Option(help="Most model calls (plan: tasks) in flight at once.")] = 8,
    model: Model = None,
    base_url: BaseUrl = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the table.")] = False,
) -> None:
    """Continue a run from its SQLite checkpoint; branches and plan tasks that had finished are not run again."""
    use_endpoint(cli, model, base_url)
    context = checked_options(base_context(cli, max_concurrency=concurrency), RUN_OPTIONS)
    settings = settings_mod.load()
    if not settings.checkpoint_path.is_file():
        fail(f"no run with thread id {thread_id!r}: searched {settings.checkpoint_path}, which does not exist "
             "(set PARALLAX_HOME to the home of the original run)")
    _finish(None, None, thread_id, context, as_json)
