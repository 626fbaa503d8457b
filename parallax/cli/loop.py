"""`parallax loop once|status|install`: the closed loop, from stored runs to a released playbook.

See docs/data-loop.md#the-closed-loop-learning-from-production-released-without-a-person.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from parallax.cli.common import (
    AsJson,
    Name,
    Tenant,
    as_option,
    base_context,
    checked_tenant,
    durable_graph,
    emit,
    fail,
    graph_failures,
    no_store_yet,
    with_store,
)
from parallax.cli.endpoint import BaseUrl, Model, use_endpoint
from parallax.cli.examples import epilog
from parallax.cli.tables import elide, new_table, when

loop_app = typer.Typer(
    help=(
        "The closed loop: learn from stored runs, gate, release on canary; once, on a cron, "
        "and what the last rounds did."
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)

Since = Annotated[
    str | None, typer.Option(help="Only runs this recent (7d, 12h, 30m, 2w, or a date).")
]
Limit = Annotated[
    int, typer.Option(help="The most stored runs one round learns from (oldest first).")
]
Share = Annotated[
    float, typer.Option(help="Percent of threads a new candidate's canary gets (0 < P < 100).")
]
MinRuns = Annotated[
    int, typer.Option(help="Runs per arm before the canary rule first looks (then 2x, 4x, ...).")
]
MaxRuns = Annotated[
    int,
    typer.Option(
        help="Runs per arm at the rule's last look; undecided by then = a person decides."
    ),
]
ErrorRate = Annotated[
    float, typer.Option(help="Stated error rate of the canary's automatic decision (each way).")
]
Margin = Annotated[
    float, typer.Option(help="How much worse (success rate) a canary may be and still be promoted.")
]
EVERY = re.compile(r"^(\d+)([mhd])$")
LOOP_OPTIONS = {
    name: "--" + name.replace("_", "-")
    for name in (
        "playbook",
        "tenant",
        "since",
        "limit",
        "share",
        "min_runs",
        "max_runs",
        "error_rate",
        "margin",
    )
}
"""The option of `loop` that sets each field of the loop graph's input (they have the same names).
"""


def loop_input(
    playbook: str,
    tenant: str | None,
    since: str | None,
    limit: int,
    share: float,
    min_runs: int,
    max_runs: int,
    error_rate: float,
    margin: float,
) -> dict[str, Any]:
    """The `loop` graph's input, checked here (logic/run_input.py, as every face checks it) so a bad
    argument is one line naming the option, exit 2."""
    from parallax.logic.run_input import RunInputError, check_run_input

    given: dict[str, Any] = {
        "playbook": playbook,
        "limit": limit,
        "share": share,
        "min_runs": min_runs,
        "max_runs": max_runs,
        "error_rate": error_rate,
        "margin": margin,
        **({"since": since} if since else {}),
        **({"tenant": tenant} if tenant else {}),
    }
    try:
        check_run_input("loop", given)
    except RunInputError as exc:
        fail(as_option(exc, LOOP_OPTIONS))
    return given


def round_line(record: dict[str, Any]) -> str:
    found, canary = record.get("traces") or {}, record.get("canary") or {}
    gate = record.get("gate")
    gate_text = (
        "none"
        if gate is None
        else (
            f"{gate['before']} -> {gate['after']} on {gate['val_size']} replayed"
            if gate["claimed"]
            else "no offline gate claimed (no run carried a target)"
        )
    )
    return (
        f"round {record['round']} ({record['playbook']}): {record['status']} - {record['why']}; "
        f"runs consumed {found.get('consumed', 0)}"
        + given_up_text(found)
        + f"; gate: {gate_text}; canary: {canary.get('state', 'none')}"
        + (f" v{canary['version']}" if canary.get("version") is not None else "")
        + (f", production v{canary['production']}" if canary.get("production") is not None else "")
    )


def given_up_text(found: dict[str, Any]) -> str:
    """What a round's failed reflections did to its runs, or nothing when none failed."""
    parts = [
        f"{found[k]} {what}"
        for k, what in (
            ("to_retry", "to retry (reflection failed)"),
            ("unlearnable", "given up as unlearnable"),
            ("waiting", "put off after failed reflections"),
            ("dropped", "left to a round that claimed them after this one's claim expired"),
        )
        if found.get(k)
    ]
    return f", {', '.join(parts)}" if parts else ""


def once(
    cli: typer.Context,
    playbook: Name = "default",
    tenant: Tenant = "default",
    since: Since = None,
    limit: Limit = 200,
    share: Share = 10.0,
    min_runs: MinRuns = 50,
    max_runs: MaxRuns = 1600,
    error_rate: ErrorRate = 0.05,
    margin: Margin = 0.05,
    model: Model = None,
    base_url: BaseUrl = None,
    as_json: AsJson = False,
) -> None:
    """Run one round: look again at the canary, learn from new stored runs, gate, put the candidate
    on canary."""
    use_endpoint(cli, model, base_url)
    checked_tenant(tenant)
    given = loop_input(
        playbook, tenant, since, limit, share, min_runs, max_runs, error_rate, margin
    )
    from parallax.runtime.storage.stores import has_cli_store

    if not has_cli_store():
        no_store_yet()
    record = asyncio.run(run_once(given, base_context(cli)))
    if as_json:
        return emit(record)
    Console(highlight=False).print(round_line(record))


async def run_once(given: dict[str, Any], context: Any) -> dict[str, Any]:
    from parallax.graphs.loop import builder
    from parallax.nodes.schedule import InvalidLearnInput

    with graph_failures(InvalidLearnInput, ValueError):
        async with durable_graph(builder) as graph:
            out: dict[str, Any] = await graph.ainvoke(
                given,
                {
                    "configurable": {"thread_id": f"loop-{uuid.uuid4().hex}"},
                    "recursion_limit": 10_000,
                },
                context=context,
            )
    return out


def status(
    playbook: Name = "default",
    tenant: Tenant = "default",
    last: Annotated[int, typer.Option(help="How many rounds to show, newest last.")] = 10,
    as_json: AsJson = False,
) -> None:
    """The last rounds: runs consumed, candidate, gate result, canary state; the playbook's runs by
    outcome."""
    from parallax.logic.loop import canary_state, rounds
    from parallax.runtime.storage.consumed import MAX_FAILURES
    from parallax.runtime.storage.stores import consumed_in, playbooks_in

    if last < 1:
        fail(f"--last must be at least 1, got {last}")

    async def read(store: Any) -> dict[str, Any]:
        return {
            "playbook": playbook,
            "tenant": tenant,
            "rounds": await rounds(store, tenant, playbook, last),
            "canary": canary_state(await playbooks_in(store, tenant).labels(playbook).get()),
            "runs": await consumed_in(store, tenant, playbook).outcomes(),
        }

    view = with_store(read, tenant)
    if as_json:
        return emit(view)
    console = Console(highlight=False)
    if not view["rounds"]:
        console.print(
            f"no loop rounds yet for playbook {playbook!r} of tenant {tenant!r}: run `parallax loop"
            " once`"
        )
    else:
        console.print(rounds_table(playbook, tenant, view["rounds"]))
    canary = view["canary"]
    console.print(
        f"now: production v{canary.get('production')}, canary {canary['state']}"
        + (f" v{canary['version']}" if canary.get("version") is not None else "")
    )
    runs = view["runs"]
    console.print(
        f"stored runs: {runs['learned']} learned from, {runs['unlearnable']} given up as"
        f" unlearnable (their reflection failed {MAX_FAILURES} times), {runs['claimed']} claimed"
        f" now, {runs['waiting']} waiting after failed reflections"
        + (
            f" (the first tried again after {when(runs['next_try_at'])} UTC)"
            if runs["waiting"]
            else ""
        )
        + f", {runs['to_retry']} to retry"
    )


def rounds_table(playbook: str, tenant: str, rounds: list[dict[str, Any]]) -> Table:
    """One row per round: when, what it did, runs consumed and given up, candidate, gate, canary
    after it, why."""
    table = new_table(
        f"loop rounds of {playbook} ({tenant})",
        ("started", "status", "runs", "given up", "candidate", "gate", "canary", "why"),
        text=("why",),
    )
    for r in rounds:
        gate, cand, canary = r.get("gate"), r.get("candidate") or {}, r.get("canary") or {}
        found = r.get("traces") or {}
        table.add_row(
            when(r["started_at"]),
            r["status"],
            str(found.get("consumed", 0)),
            str(found.get("unlearnable", 0)),
            f"v{cand['version']}" if cand.get("version") is not None else "-",
            (
                "-"
                if gate is None
                else f"{gate['before']}→{gate['after']}"
                if gate["claimed"]
                else "none"
            ),
            canary.get("state", "none")
            + (f" v{canary['version']}" if canary.get("version") is not None else ""),
            elide(r.get("why"), 80),
        )
    return table


def cron_schedule(every: str) -> str:
    """A period (15m, 1h, 6h, 1d) as a cron expression; a period cron cannot say is refused."""
    m = EVERY.match(every.strip().lower())
    if not m:
        fail(f"bad --every {every!r}: use minutes, hours or days such as 15m, 1h, 6h, 1d")
    n, unit = int(m.group(1)), m.group(2)
    if unit == "m" and n >= 1 and 60 % n == 0:
        return "* * * * *" if n == 1 else f"*/{n} * * * *"
    if unit == "h" and n >= 1 and 24 % n == 0:
        return "0 * * * *" if n == 1 else f"0 */{n} * * *"
    if unit == "d" and n == 1:
        return "0 0 * * *"
    fail(
        f"bad --every {every!r}: cron repeats evenly only for minutes dividing 60 (15m), hours"
        " dividing 24 (6h), or 1d"
    )


def install(
    every: Annotated[str, typer.Option(help="How often the loop runs: 15m, 1h, 6h, 1d.")] = "1h",
    url: Annotated[
        str, typer.Option(help="The served graph API (`parallax serve`).")
    ] = "http://127.0.0.1:2026",
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key", envvar="PARALLAX_API_KEY", help="Your API key (it names your tenant)."
        ),
    ] = None,
    playbook: Name = "default",
    since: Since = None,
    limit: Limit = 200,
    share: Share = 10.0,
    min_runs: MinRuns = 50,
    max_runs: MaxRuns = 1600,
    error_rate: ErrorRate = 0.05,
    margin: Margin = 0.05,
    as_json: AsJson = False,
) -> None:
    """Set up a cron on the served API that runs the loop every period (replacing this playbook's
    earlier one)."""
    schedule = cron_schedule(every)
    given = loop_input(playbook, None, since, limit, share, min_runs, max_runs, error_rate, margin)
    try:
        cron = asyncio.run(install_cron(url, api_key, schedule, given))
    except Exception as exc:  # noqa: BLE001 - the server's answer, in one line
        fail(
            f"could not set up the cron at {url}: {type(exc).__name__}:"
            f" {str(exc).splitlines()[0] if str(exc) else ''}",
            code=1,
        )
    if as_json:
        return emit(cron)
    Console(highlight=False).print(
        f"loop of playbook {playbook!r} runs {schedule!r} (every {every}) on {url}; "
        f"cron {cron['cron_id']}; see `parallax loop status` (with PARALLAX_DATABASE_URL)"
    )


async def install_cron(
    url: str, api_key: str | None, schedule: str, given: dict[str, Any]
) -> dict[str, Any]:
    """Create the cron, after deleting this playbook's earlier loop crons (installing twice runs it
    once)."""
    from langgraph_sdk import get_client

    client = get_client(url=url, api_key=api_key)
    metadata = {"parallax": "loop", "playbook": given["playbook"]}
    for old in await client.crons.search(assistant_id="loop", limit=100):
        if (old.get("metadata") or {}).get("parallax") == "loop" and old["metadata"].get(
            "playbook"
        ) == given["playbook"]:
            await client.crons.delete(old["cron_id"])
    created = await client.crons.create("loop", schedule=schedule, input=given, metadata=metadata)
    crons = [
        c
        for c in await client.crons.search(assistant_id="loop", limit=100)
        if (c.get("metadata") or {}).get("playbook") == given["playbook"]
    ]
    cron = crons[0] if crons else dict(created)
    out: dict[str, Any] = json.loads(
        json.dumps(
            {
                "cron_id": cron.get("cron_id"),
                "schedule": schedule,
                "input": given,
                "next_run_date": cron.get("next_run_date"),
            },
            default=str,
        )
    )
    return out


loop_app.command("once", epilog=epilog("loop once"))(once)
loop_app.command("status", epilog=epilog("loop status"))(status)
loop_app.command("install", epilog=epilog("loop install"))(install)
