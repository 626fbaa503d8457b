"""`parallax learn` and `parallax eval`: improve a playbook from tasks, and measure one.

See docs/learning.md; `learn --from-traces`: docs/data-loop.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from parallax.cli.common import (
    EarlyStop,
    MaxCost,
    MaxTokens,
    Tenant,
    Votes,
    as_option,
    base_context,
    checked_tenant,
    durable_graph,
    err,
    fail,
    graph_failures,
    located,
    no_store_yet,
    open_playbooks,
    require_known,
    write_atomically,
)
from parallax.cli.endpoint import BaseUrl, Model, use_endpoint
from parallax.cli.learn_report import LearnProgress, summary
from parallax.cli.model_notice import print_model_notice
from parallax.runtime import settings as settings_mod
from parallax.runtime.model_note import on_embedded_model
from parallax.runtime.run_context import resolved
from parallax.state.context import Context, setting
from parallax.state.records import TaskData
from parallax.state.vocabulary import BUSINESS_ROUTES, MODES

LEARN_OPTIONS = {
    "batch": "--batch",
    "epochs": "--epochs",
    "val_size": "--val-size",
    "limit": "--limit",
    "votes": "--votes",
    "mode": "--mode",
    "margin": "--margin",
    "since": "--since",
    "playbook": "--playbook",
    "tenant": "--tenant",
    "context.max_concurrency": "--concurrency",
    "context.early_stop": "--early-stop",
}
"""The option of `learn` and `eval` that sets each input field or run setting a refusal may name."""
EACH_TASK = "?"
EVAL_MODES = " | ".join(mode for mode in MODES if mode == "auto" or mode in BUSINESS_ROUTES)
"""The solve modes `eval --mode` names: auto and the routes of business branches."""
"""The task `eval` checks its options with: each of its tasks runs as a solve input with them."""


def checked_run(graph: str, payload: dict[str, Any], context: Context) -> None:
    """The graph input's own checks (logic/run_input.py, as every face runs them), before any work
    starts; a refusal names the option at fault."""
    from parallax.logic.run_input import RunInputError, check_run_input

    try:
        check_run_input(graph, payload, context)
    except RunInputError as exc:
        fail(as_option(exc, LEARN_OPTIONS))


def _tasks(path: Path, skip_bad: bool, what: str, scorer: str | None = None) -> list[TaskData]:
    """Tasks from a JSONL file; `scorer` (when given) overrides each line's own."""
    from parallax.logic.task_files import SCORER_NAMES, TaskFileError, load_tasks

    if scorer is not None and scorer not in SCORER_NAMES:
        fail(f"unknown scorer {scorer!r}: use one of {', '.join(SCORER_NAMES)}")
    try:
        tasks, problems = load_tasks(path, skip_bad=skip_bad)
    except TaskFileError as exc:
        fail(f"{what}: {exc}")
    for problem in problems:
        err.print(f"[yellow]skipped[/] {problem}", highlight=False)
    return [{**t, "scorer": scorer} for t in tasks] if scorer else tasks


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=not enabled,
        transient=False,
    )


async def run_learn(
    payload: dict[str, Any], thread_id: str, context: Context, interactive: bool, show: bool
) -> dict[str, Any]:
    """The learn graph on the CLI's store, its events shown as they come (cli/learn_report.py); its
    output."""
    from langgraph.types import Command

    from parallax.graphs.learn import builder
    from parallax.nodes.schedule import InvalidLearnInput
    from parallax.state.learn import LearnOutput

    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 10_000}
    result: dict[str, Any] = {}
    with graph_failures(InvalidLearnInput, ValueError):
        async with durable_graph(builder) as graph:
            with LearnProgress(err, enabled=show) as progress:
                progress.starting(plan_line(payload))
                next_input: dict[str, Any] | Command[str] = payload
                while True:
                    async for mode, chunk in graph.astream(
                        next_input,
                        config,
                        context=context,
                        stream_mode=["updates", "values", "custom"],
                    ):
                        if mode == "values":
                            result = {
                                k: v for k, v in chunk.items() if k in LearnOutput.__annotations__
                            }
                        elif mode == "custom":
                            if isinstance(chunk, dict):
                                progress.event(chunk)
                        else:
                            for node, update in chunk.items():
                                if node == "start" and update.get("traces"):
                                    progress.say(traces_line(update["traces"]))
                                elif node == "commit":
                                    for b in update.get("batches", []):
                                        progress.batch_done(b)
                    state = await graph.aget_state(config)
                    if not state.interrupts:
                        break
                    question = state.interrupts[0].value
                    err.print(json.dumps(question, indent=2), highlight=False)
                    if interactive:
                        answer = typer.confirm(question["question"], default=False, err=True)
                    else:
                        answer = sys.stdin.readline().strip().lower() in ("y", "yes")
                    next_input = Command(resume="yes" if answer else "no")
    return result


def learn(
    cli: typer.Context,
    train: Annotated[
        Path | None,
        typer.Argument(
            help="Training tasks, JSONL: {context|question|input, target|answer}; "
            "leave out with --from-traces."
        ),
    ] = None,
    from_traces: Annotated[
        bool,
        typer.Option(
            "--from-traces",
            help="Learn from the stored runs the playbook served: "
            "each run's target, else its feedback, else its status; each run once.",
        ),
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            help="With --from-traces: only runs this recent (7d, 12h, 30m, 2w, or a date)."
        ),
    ] = None,
    val: Annotated[
        Path | None, typer.Option(help="Validation tasks for the gate (same format).")
    ] = None,
    val_size: Annotated[int, typer.Option(help="Validation tasks per gate evaluation.")] = 50,
    batch: Annotated[
        int, typer.Option(help="Tasks run (and reflected on) in parallel per update.")
    ] = 8,
    epochs: Annotated[int, typer.Option(help="Passes over the training data.")] = 1,
    playbook: Annotated[
        str, typer.Option(help="Playbook to improve (created if new).")
    ] = "default",
    tenant: Tenant = "default",
    approve: Annotated[
        bool, typer.Option("--approve", help="Ask a human before each update that passes the gate.")
    ] = False,
    margin: Annotated[
        float, typer.Option(help="Accepted drop in validation accuracy (0 = must not get worse).")
    ] = 0.0,
    mode: Annotated[
        str,
        typer.Option(
            help="Solve mode for the runs: "
            "direct (default, one call per task) | vote | section | auto."
        ),
    ] = "direct",
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Leave out bad JSONL lines instead of stopping.")
    ] = False,
    scorer: Annotated[
        str | None,
        typer.Option(help="auto | numeric | exact | contains (default: each line's, else auto)."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            help="Use only the first N training tasks (with --from-traces: the "
            "oldest N runs not learned from yet)."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Most model calls in flight at once.")] = 16,
    thread: Annotated[
        str | None, typer.Option(help="Thread id of the checkpoint (default: new).")
    ] = None,
    votes: Votes = None,
    early_stop: EarlyStop = None,
    max_cost: MaxCost = None,
    max_tokens: MaxTokens = None,
    model: Model = None,
    base_url: BaseUrl = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Learn a playbook: run tasks (or read stored runs) in parallel batches, reflect, curate,
    merge, gate, commit."""
    use_endpoint(cli, model, base_url)
    if (train is None) == (not from_traces):
        fail("give a task file or --from-traces (the stored runs), one of the two")
    if since is not None and not from_traces:
        fail("--since goes with --from-traces: a task file has no dates")
    if from_traces and epochs != 1:
        fail("--epochs: --from-traces learns from each stored run once")
    checked_tenant(tenant)
    tasks = _tasks(train, skip_bad, "training data", scorer)[:limit] if train is not None else []
    val_tasks = _tasks(val, skip_bad, "validation data", scorer) if val else []
    source: dict[str, Any] = (
        {"from_traces": True, **({"since": since} if since else {})}
        if from_traces
        else {"tasks": tasks}
    )
    payload = {
        **source,
        "val_tasks": val_tasks,
        "val_size": val_size,
        "batch": batch,
        "epochs": epochs,
        "playbook": playbook,
        "tenant": tenant,
        "approve": approve,
        "mode": mode,
        "margin": margin,
        **({"votes": votes} if votes is not None else {}),
        **({"limit": limit} if limit is not None else {}),
        **{k: v for k, v in (("max_cost", max_cost), ("max_tokens", max_tokens)) if v is not None},
    }
    context = base_context(cli, max_concurrency=concurrency, early_stop=early_stop)
    checked_run("learn", payload, context)
    if from_traces:
        from parallax.runtime.storage.stores import has_cli_store

        if not has_cli_store():
            no_store_yet()
    started = time.perf_counter()
    interactive = sys.stdin.isatty() and err.is_terminal
    result = asyncio.run(
        run_learn(payload, thread or uuid.uuid4().hex, context, interactive, show=not as_json)
    )
    result = {
        **result,
        **failure_totals(result.get("batches", [])),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        if result.get("traces"):
            err.print(
                stored_runs_line(result["traces"]), highlight=False, markup=False, soft_wrap=True
            )
        err.print(
            summary(
                result,
                max_tokens=setting(resolved(context).max_tokens),
                embedded=on_embedded_model(context),
            ),
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    print_model_notice(context)


def plan_line(payload: dict[str, Any]) -> str:
    """What a learn run is about to do, said before its first model call."""
    source = "the stored runs" if payload.get("from_traces") else f"{len(payload['tasks'])} tasks"
    val = min(len(payload.get("val_tasks") or []), payload["val_size"])
    epochs = f", {payload['epochs']} passes" if payload["epochs"] > 1 else ""
    runs = len(payload.get("tasks") or []) * payload["epochs"]
    batches = (
        "in one batch" if 0 < runs <= payload["batch"] else f"in batches of {payload['batch']}"
    ) + epochs
    return f"learning playbook {payload['playbook']} from {source} {batches}; " + (
        f"the gate measures it on {val} validation tasks before the first batch and after each"
        if val
        else "no validation tasks: the gate cannot measure the candidates"
    )


def traces_line(found: dict[str, Any]) -> str:
    """What `--from-traces` found, for the terminal."""
    signals = (
        ", ".join(f"{n} by {source}" for source, n in found.get("by_signal", {}).items()) or "none"
    )
    return (
        f"stored runs: {found['considered']} served by the playbook, {found['claimed']} to learn"
        f" from ({signals}); {found['no_signal']} without a signal, {found['taken_before']} taken"
        " before (learned from, given up, or claimed by another round"
        + (
            f"; {found['recovered']} of them learned by a round killed before it marked "
            "them, marked consumed now"
            if found.get("recovered")
            else ""
        )
        + "), "
        + (f"{found['waiting']} put off after failed reflections, " if found.get("waiting") else "")
        + f"{found['task_not_kept']} whose task was not kept; {found['replayed_in_gate']} with a"
        " target replayed in the gate"
    )


def stored_runs_line(found: dict[str, Any]) -> str:
    """What `--from-traces` did with the runs it claimed, said before the summary."""
    return (
        f"stored runs learned from {found.get('consumed', 0)}, to retry {found.get('to_retry', 0)}"
        f" (reflection failed), given up as unlearnable {found.get('unlearnable', 0)}"
        + (
            f", left to another round {found['dropped']} (it claimed them after this run's claim"
            " expired)"
            if found.get("dropped")
            else ""
        )
    )


def failure_totals(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """The learn run's failed training tasks and validation runs by cause, summed over its
    batches."""
    from collections import Counter

    totals: dict[str, Counter[str]] = {"failures": Counter(), "val_failures": Counter()}
    for batch in batches:
        for key, counts in totals.items():
            counts.update(batch.get(key) or {})
    return {key: dict(counts.most_common()) for key, counts in totals.items()}


def evaluate_command(
    cli: typer.Context,
    data: Annotated[Path, typer.Argument(help="Tasks to evaluate, JSONL.")],
    playbook: Annotated[str, typer.Option(help="Playbook whose lessons the runs see.")] = "default",
    tenant: Tenant = "default",
    version: Annotated[
        int | None, typer.Option(help="Playbook version (default: the head).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Evaluate only the first N tasks.")] = None,
    mode: Annotated[str, typer.Option(help=f"Solve mode: {EVAL_MODES}.")] = "auto",
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Leave out bad JSONL lines instead of stopping.")
    ] = False,
    scorer: Annotated[
        str | None,
        typer.Option(help="auto | numeric | exact | contains (default: each line's, else auto)."),
    ] = None,
    results: Annotated[
        Path | None,
        typer.Option(help="Per-item results file (default: under PARALLAX_HOME/evals)."),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Tasks solved at once.")] = 8,
    votes: Votes = None,
    early_stop: EarlyStop = None,
    model: Model = None,
    base_url: BaseUrl = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Measure accuracy on tasks with a playbook version; per-item results go to a file."""
    use_endpoint(cli, model, base_url)
    if limit is not None and limit < 1:
        fail(f"--limit must be at least 1, got {limit}")
    context = base_context(cli, early_stop=early_stop)
    checked_run(
        "solve",
        {
            "task": EACH_TASK,
            "mode": mode,
            "playbook": playbook,
            "tenant": tenant,
            **({"votes": votes} if votes is not None else {}),
        },
        dataclasses.replace(context, max_concurrency=concurrency),
    )
    tasks = _tasks(data, skip_bad, "evaluation data", scorer)[:limit]
    home = settings_mod.load().home
    out = asyncio.run(
        run_eval(
            tasks,
            playbook,
            tenant,
            version,
            mode,
            concurrency,
            context,
            show=not as_json,
            votes=votes,
        )
    )
    target = (
        results
        or home / "evals" / f"eval-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.jsonl"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(
        target, "".join(json.dumps(r) + "\n" for r in out.pop("results")).encode("utf-8")
    )
    out["results_file"] = str(target)
    if as_json:
        print(json.dumps(out))
    else:
        err.print(
            f"accuracy {out['accuracy']} on {out['n']} tasks ({out['errors']} failed runs"
            + "".join(f", {n} {cause}" for cause, n in out["failures"].items())
            + f"), playbook {playbook} v{out['playbook_version']}; results in {target}",
            highlight=False,
        )
    print_model_notice(context)


async def run_eval(
    tasks: list[TaskData],
    name: str,
    tenant: str,
    version: int | None,
    mode: str,
    concurrency: int,
    context: Context,
    show: bool,
    votes: int | None = None,
) -> dict[str, Any]:
    from parallax.graphs.solve import builder
    from parallax.logic.evaluate import evaluate
    from parallax.runtime.storage.namespaces import StoreError

    async with open_playbooks(write=False, tenant=tenant) as playbooks:
        try:
            await require_known(playbooks, name)
            chosen = await (
                playbooks.head(name) if version is None else playbooks.get(name, version)
            )
        except StoreError as exc:
            fail(located(exc))
        with _progress(show) as progress:
            bar = progress.add_task("evaluating", total=len(tasks))
            solve = builder.compile(checkpointer=False, name="solve")
            result = await evaluate(
                solve,
                tasks,
                [i.as_data() for i in chosen.active],
                chosen.version,
                resolved(context),
                tenant=tenant,
                concurrency=concurrency,
                mode=mode,
                on_result=lambda _: progress.advance(bar),
                traced=False,
                votes=votes,
            )
    return {"playbook": name, "tenant": tenant, "playbook_version": chosen.version, **result}
