"""`parallax trace ID` and `parallax dlq list|show|retry`: branch lifecycles, and what gave up.

A retry holds the store's lock on its dead letter, so two retries of one branch never both run.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from parallax.cli.common import (
    AsJson,
    Tenant,
    base_context,
    emit,
    err,
    fail,
    no_store_yet,
    with_store,
)
from parallax.cli.endpoint import BaseUrl, Model, use_endpoint
from parallax.cli.tables import elide, new_table, print_table, short_id, when
from parallax.logic.spend import cost_text, spend_of
from parallax.runtime.storage.namespaces import StoreError
from parallax.state.context import Context

if TYPE_CHECKING:
    from parallax.runtime.storage.trace_store import TraceStore
    from parallax.state.lifecycle import Transition
    from parallax.state.records import BranchSpec
    from parallax.state.trace_record import DeadLetter, LetterRetry, TraceRecord

T = TypeVar("T")

dlq_app = typer.Typer(
    help="Dead letters: branches that escalated after their last retry, with input and last error.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def with_traces(work: Callable[[TraceStore], Awaitable[T]], tenant: str) -> T:
    """Run `work(traces)` on the tenant's traces; a home nothing has run in is an exit 2 that says
    where it looked."""
    from parallax.runtime.storage.stores import traces_in

    return with_store(lambda store: work(traces_in(store, tenant)), tenant, missing=no_store_yet)


def path_of(transitions: list[Transition]) -> str:
    return " > ".join(t["state"] for t in transitions)


def seconds_between(transitions: list[Transition]) -> float:
    return round(transitions[-1]["at"] - transitions[0]["at"], 3) if len(transitions) > 1 else 0.0


Timeline = Annotated[
    Path | None,
    typer.Option(
        "--timeline",
        metavar="FILE",
        dir_okay=False,
        help=(
            "Also draw the run over time into FILE (.svg, or .html to open in a browser): one lane"
            " per branch, queued / running / failed / retry, backups, cancelled votes, a vote's"
            " waves, plan tasks and the dependencies they waited on."
        ),
    ),
]


def trace(
    trace_id: Annotated[str, typer.Argument(help="The trace id `parallax run` printed.")],
    tenant: Tenant = "default",
    as_json: AsJson = False,
    timeline_file: Timeline = None,
) -> None:
    """Show a run's branches: the lifecycle of each (PENDING > DISPATCHED > IN_PROGRESS > ...), with
    times and reasons."""
    if timeline_file is not None and timeline_file.suffix.lower() not in (".svg", ".html"):
        fail(
            "--timeline writes SVG or HTML: name a file ending in .svg or .html, not"
            f" {timeline_file.name!r}"
        )
    found = with_traces(lambda traces: traces.get_trace(trace_id), tenant)
    if timeline_file is not None:
        write_timeline(found, timeline_file)
    if as_json:
        return emit(found)
    console = Console(highlight=False)
    console.print(
        f"trace {found['trace_id']} ({found['tenant']}): [bold]{found['status']}[/]"
        f" {found['mode']}, confidence {found['confidence']}"
        + (f" - {escape(found['reason'])}" if found["reason"] else "")
    )
    console.print(trace_table(found))
    spend = spend_of(found.get("branches") or [])
    console.print(
        f"spent {spend['tokens']} tokens ({spend['prompt_tokens']} prompt, {spend['cached_tokens']}"
        f" of them cached, {spend['completion_tokens']} completion): {cost_text(spend)}",
        markup=False,
    )
    if found.get("vote_plan"):
        console.print(plan_text(found["vote_plan"]), markup=False)
    speculation = (found.get("verification") or {}).get("speculation")
    if speculation:
        console.print(speculation_table(speculation))
    console.print(f"answer: {found['answer'] or '(none)'}", markup=False)


def plan_text(plan: dict[str, Any]) -> str:
    """A vote's plan in two lines: its waves and expected cost against the others, and what it was
    priced on."""

    def money(value: float) -> str:
        return f"${value:.6f}" if plan.get("unit") == "usd" else f"{value:,.0f} token-equivalents"

    def waves(first: int, least: int) -> str:
        return f"first wave {first}, later waves at least {least}"

    against = "; ".join(
        f"{name.replace('_', ' ')} ({waves(c['first_wave'], c['min_wave'])}):"
        f" {money(c['expected_cost'])}"
        for name, c in (plan.get("against") or {}).items()
    )
    on = plan.get("priced_on") or {}
    return (
        f"vote plan: {plan['plan'].replace('_', ' ')}"
        f" ({waves(plan['first_wave'], plan['min_wave'])}), expected {money(plan['expected_cost'])}"
        f" a question, {plan['expected_votes']:g} votes in {plan['expected_requests']:g} requests;"
        f" against {against}\n  priced on: a prompt of {on.get('prompt_tokens')} tokens (counted by"
        f" {on.get('counted_by')}), replies of ~{on.get('reply_tokens')} tokens,"
        f" {on.get('cache_hit', 0):.0%} of a repeated prompt cached,"
        f" {'one request a wave' if on.get('takes_n') else 'a request a vote'},"
        f" {on.get('votes_seen', 0)} earlier votes of {on.get('model')}"
    )


def write_timeline(found: TraceRecord, path: Path) -> None:
    """The run's timeline into `path` (written whole through a temporary file beside it, so a failed
    write leaves no half picture); a folder that does not exist is an exit 2."""
    from parallax.logic.timeline import timeline
    from parallax.logic.timeline_svg import render_svg

    if not path.parent.is_dir():
        fail(
            f"--timeline: folder {str(path.parent)!r} does not exist: create it or name another"
            " file"
        )
    svg = render_svg(timeline(found))
    text = (
        svg
        if path.suffix.lower() == ".svg"
        else (
            f'<!doctype html><meta charset="utf-8"><title>trace {found["trace_id"][:8]}</title>'
            f'<body style="margin:0">{svg}</body>'
        )
    )
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    err.print(f"timeline: {path}", highlight=False)


def trace_table(found: TraceRecord) -> Table:
    """A trace's branches: lifecycle path and the reasons of its failures (elided to 300
    characters)."""
    table = new_table(
        None,
        ("branch", "state", "s", "tries", "tokens", "USD", "path", "why"),
        text=("path", "why"),
    )
    for b in found["branches"]:
        steps = b.get("transitions") or []
        reasons = "; ".join(
            dict.fromkeys(
                elide(t["reason"], 160)
                for t in steps
                if t["state"] in ("TIMEOUT", "FAILED", "ESCALATED") and t["reason"]
            )
        )
        if backup := b.get("backup"):
            reasons = f"backup copy ({backup['reason']}), {backup['winner']} won; " + reasons
        speculation = b.get("speculation") or {}
        if speculation:
            check = speculation.get("check") or {}
            verdict = (
                "" if not check else f", check {'passed' if check.get('passed') else 'failed'}"
            )
            reasons = "; ".join(
                x
                for x in (
                    (
                        f"{speculation.get('approach')} at"
                        f" {speculation.get('temperature')}{verdict}:"
                        f" {speculation.get('result') or '?'}"
                    ),
                    speculation.get("refused", ""),
                    speculation.get("why", ""),
                    reasons,
                )
                if x
            )
        if b.get("cause") == "budget":
            reasons = "; ".join(x for x in (b.get("error") or "budget reached", reasons) if x)
        tokens = (b.get("tokens") or {}).get("total", 0)
        cost = b.get("cost_usd")
        table.add_row(
            b["id"],
            b.get("state") or b["status"],
            f"{seconds_between(steps):.2f}",
            str(b.get("attempts", 1)),
            str(tokens),
            "?" if cost is None and tokens else f"{cost or 0:.6f}",
            path_of(steps),
            elide(reasons, 300),
        )
    return table


def speculation_table(report: dict[str, Any]) -> Table:
    """A speculative run's candidates: approach, temperature, check, result and why each one lost;
    the title says where the checks ran (in bubblewrap, or unconfined and why: runtime/sandbox.py).
    """
    where = sorted(
        {
            c["check"]["sandbox"]
            for c in report.get("candidates", [])
            if (c.get("check") or {}).get("sandbox")
        }
    )
    ran = f"; checks: {', '.join(where)}" if where else ""
    table = new_table(
        f"candidates (picked by {report.get('by')}{ran})",
        ("candidate", "approach", "temp", "check", "result", "why"),
        text=("why",),
    )
    for c in report.get("candidates", []):
        check = c.get("check") or {}
        shown = (
            "refused"
            if c.get("refused")
            else (
                "-"
                if not check
                else (
                    "timed out"
                    if check.get("timed_out")
                    else (
                        f"{'pass' if check.get('passed') else 'fail'}"
                        f" ({check.get('passed_tests', 0)} ok)"
                    )
                )
            )
        )
        table.add_row(
            c["id"],
            str(c.get("approach")),
            f"{c.get('temperature')}",
            shown,
            str(c.get("result") or c["status"]),
            elide(c.get("refused") or c.get("why") or "", 200),
        )
    return table


def _letter_row(d: DeadLetter) -> dict[str, Any]:
    return {
        k: d[k] for k in ("id", "kind", "trace_id", "status", "attempts", "escalated_at", "error")
    } | {"retries": len(d.get("retries", []))}


@dlq_app.command("list")
def dlq_list(
    tenant: Tenant = "default",
    show_all: Annotated[
        bool, typer.Option("--all", help="Include letters a retry resolved.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """List dead letters (open ones unless --all), oldest first."""
    letters = [
        d
        for d in with_traces(lambda traces: traces.dead_letters(), tenant)
        if show_all or d["status"] == "open"
    ]
    if as_json:
        return emit([_letter_row(d) for d in letters])
    print_table(
        Console(),
        letters_table(tenant, letters),
        "none"
        + ("" if show_all else " open (--all lists retried and dropped ones too)")
        + ": no branch has given up after its retries",
    )


def letters_table(tenant: str, letters: list[DeadLetter]) -> Table:
    """Dead letters: the trace id short (`parallax trace` takes it), the last error elided to 120
    characters."""
    table = new_table(
        f"dead letters of {tenant} ({len(letters)})",
        ("branch", "trace", "status", "escalated", "retries", "last error"),
        text=("escalated", "last error"),
    )
    for d in letters:
        table.add_row(
            d["id"],
            short_id(d["trace_id"]),
            d["status"],
            when(d["escalated_at"]),
            str(len(d["retries"])),
            elide(d["error"], 120),
        )
    return table


@dlq_app.command("show")
def dlq_show(
    branch_id: Annotated[str, typer.Argument(help="Branch id from `parallax dlq list`.")],
    tenant: Tenant = "default",
    as_json: AsJson = False,
) -> None:
    """Show one dead letter: its input, last error and retries."""
    letter = with_traces(lambda traces: traces.get_dead_letter(branch_id), tenant)
    if as_json:
        return emit(letter)
    console = Console(highlight=False)
    console.print(
        f"[bold]{letter['id']}[/] ({letter['kind']}) of trace {letter['trace_id']}:"
        f" {letter['status']}, {letter['attempts']} attempts, {len(letter['retries'])} retries"
    )
    console.print(f"last error: {letter['error']}")
    console.print("input: " + json.dumps(letter["input"], ensure_ascii=False, indent=2))
    if letter.get("result"):
        console.print("result: " + json.dumps(letter["result"], ensure_ascii=False))


async def retry_letter(traces: TraceStore, branch_id: str, context: Context) -> DeadLetter:
    """Run the branch again from its stored input, under the letter's lock; record the outcome."""
    from parallax.nodes.work import run_branch
    from parallax.runtime.redaction import redact_value
    from parallax.runtime.run_context import resolved
    from parallax.runtime.timestamps import now_iso
    from parallax.state.lifecycle import Lifecycle

    async with traces.lock.hold(f"dlq/{traces.tenant}/{branch_id}"):
        letter = await traces.get_dead_letter(branch_id)
        if letter["status"] != "open":
            raise StoreError(
                f"dead letter {branch_id!r} was already resolved by a retry; nothing to do"
            )
        # the stored input of the branch (a BranchSpec when it was dispatched), under its own ids
        asked = letter["input"] or {}
        spec = cast("BranchSpec", {**asked, "id": letter["id"], "parent_id": letter["trace_id"]})
        life = Lifecycle()
        life.move("PENDING", "dlq retry")
        life.move("DISPATCHED")
        record = await run_branch(spec, resolved(context), life)
        attempt: LetterRetry = {
            "at": now_iso(),
            "status": record["status"],
            "attempts": record["attempts"],
            "error": redact_value(record.get("error") or ""),
            "transitions": record["transitions"],
        }
        letter["retries"] = [*letter["retries"], attempt]
        if record["status"] == "ok":
            letter["status"] = "resolved"
            letter["result"] = {"output": record["output"], "vote": record.get("vote")}
        else:
            letter["error"] = attempt["error"]
        await traces.put_dead_letter(letter)
        return letter


@dlq_app.command("retry")
def dlq_retry(
    cli: typer.Context,
    branch_id: Annotated[str, typer.Argument(help="Branch id from `parallax dlq list`.")],
    tenant: Tenant = "default",
    model: Model = None,
    base_url: BaseUrl = None,
    as_json: AsJson = False,
) -> None:
    """Run an escalated branch again from its stored input; exit 0 if it now succeeds, 1 if it fails
    again."""
    from parallax.runtime.model_server import ModelServerError

    use_endpoint(cli, model, base_url)

    try:
        letter = with_traces(
            lambda traces: retry_letter(traces, branch_id, base_context(cli)), tenant
        )
    except ModelServerError as exc:
        fail(f"model server: {exc}", code=1)
    if as_json:
        emit(letter)
    else:
        last = letter["retries"][-1]
        Console(highlight=False).print(
            f"{branch_id}: {'resolved' if letter['status'] == 'resolved' else 'failed again'} "
            f"(attempts: {last['attempts']})"
            + (
                f": {json.dumps(letter['result']['output'], ensure_ascii=False)}"
                if letter.get("result")
                else f" - {last['error']}"
            )
        )
    raise typer.Exit(0 if letter["status"] == "resolved" else 1)
