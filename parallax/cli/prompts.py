"""`parallax prompts ...`: versioned node prompts (answer, slice, judge, red_team, reflect, curate).

Version 0 is prompts/templates.py's template; an edit passes the playbook's gate and reaches runs
only through a release. See docs/data-loop.md.
"""

from __future__ import annotations

import asyncio
import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from parallax.cli.common import (
    AsJson,
    By,
    Reason,
    Tenant,
    base_context,
    emit,
    err,
    fail,
    open_store,
    read_utf8,
    who,
    with_store,
)
from parallax.cli.endpoint import BaseUrl, Model, use_endpoint
from parallax.cli.release import add_release_commands
from parallax.cli.tables import gate_summary, new_table, when
from parallax.runtime.storage.namespaces import StoreError

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from parallax.state.context import Context
    from parallax.state.records import TaskData

prompts_app = typer.Typer(
    help="Versioned node prompts: show, history, diff, set (gated), rollback, release, canary.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

NameArg = Annotated[
    str, typer.Argument(help="Prompt name: answer, slice, judge, red_team, reflect or curate.")
]


def _name(name: str) -> str:
    from parallax.runtime.storage.prompt_store import check_prompt_name

    try:
        return check_prompt_name(name)
    except StoreError as exc:
        fail(str(exc))


async def _overview(store: BaseStore, tenant: str) -> list[dict[str, Any]]:
    from parallax.prompts.templates import DEFAULTS
    from parallax.runtime.storage.stores import prompts_in

    prompts = prompts_in(store, tenant)
    found = await prompts.heads_and_labels(tuple(DEFAULTS))
    return [
        {
            "name": n,
            "head": head["version"],
            "production": labels["production"],
            "canary": labels["canary"],
            "used_by": DEFAULTS[n].about,
        }
        for n, (head, labels) in found.items()
    ]


@prompts_app.command()
def show(
    name: Annotated[
        str | None, typer.Argument(help="Prompt name (leave out to list them all).")
    ] = None,
    version: Annotated[int | None, typer.Option(help="Version (default: the head).")] = None,
    tenant: Tenant = "default",
    as_json: AsJson = False,
) -> None:
    """Show a prompt's texts (head or --version), or list every prompt with its head and labels."""
    from parallax.runtime.storage.stores import prompts_in

    if name is None:
        rows = with_store(lambda store: _overview(store, tenant), tenant)
        if as_json:
            return emit(rows)
        return Console().print(overview_table(tenant, rows))
    _name(name)

    async def work(store: BaseStore) -> dict[str, Any]:
        prompts = prompts_in(store, tenant)
        return await (prompts.head(name) if version is None else prompts.get(name, version))

    record = with_store(work, tenant)
    if as_json:
        return emit(record)
    console = Console(highlight=False)
    console.print(
        f"[bold]{name}[/] v{record['version']} ({record['note'] or record['created_by']})"
    )
    console.print(
        f"--- system ---\n{record['system']}\n--- user ---\n{record['user']}", markup=False
    )


@prompts_app.command()
def history(name: NameArg, tenant: Tenant = "default", as_json: AsJson = False) -> None:
    """Versions (oldest first), rejected edits and label moves of a prompt."""
    from parallax.logic.releases import labels_of
    from parallax.runtime.storage.stores import prompts_in

    _name(name)

    async def work(store: BaseStore) -> dict[str, Any]:
        prompts = prompts_in(store, tenant)
        labels = await labels_of(store, tenant, f"prompt/{name}").get()
        return {
            "versions": [
                {k: v for k, v in r.items() if k not in ("system", "user")}
                for r in await prompts.history(name)
            ],
            "candidates": [
                {k: v for k, v in c.items() if k not in ("system", "user")}
                for c in await prompts.candidates(name)
            ],
            "production": labels["production"],
            "canary": labels["canary"],
            "events": labels["events"],
        }

    found = with_store(work, tenant)
    if as_json:
        return emit(found)
    console = Console(highlight=False)
    console.print(prompt_history_table(name, found))
    for e in found["events"]:
        console.print(
            f"{e['at'][:19].replace('T', ' ')} {e['label']}: {e['from']} -> {e['to']} by {e['by']}:"
            f" {e['why']}"
        )


def overview_table(tenant: str, rows: list[dict[str, Any]]) -> Table:
    table = new_table(
        f"prompts of {tenant}",
        ("name", "head", "production", "canary", "used by"),
        text=("used by",),
    )
    for r in rows:
        table.add_row(
            r["name"], f"v{r['head']}", str(r["production"]), str(r["canary"]), r["used_by"]
        )
    return table


def prompt_history_table(name: str, found: dict[str, Any]) -> Table:
    """Versions, then rejected edits (their candidate id in the note); the gate in a few words."""
    table = new_table(
        f"prompt {name} (production {found['production']}, canary {found['canary']})",
        ("v", "from", "created", "by", "gate", "note"),
        text=("created", "by", "gate", "note"),
    )
    for r in found["versions"]:
        table.add_row(
            f"v{r['version']}",
            str(r["parent"]),
            when(r["created_at"]),
            r["created_by"],
            gate_summary(r["gate"]),
            r["note"],
        )
    for c in found["candidates"]:
        table.add_row(
            "-",
            str(c["parent"]),
            when(c["created_at"]),
            c["created_by"],
            gate_summary(c["gate"]),
            f"rejected candidate {c['candidate_id']}: {c['reason']}",
        )
    return table


@prompts_app.command()
def diff(
    name: NameArg,
    a: Annotated[int, typer.Argument(help="From version.")],
    b: Annotated[int, typer.Argument(help="To version.")],
    tenant: Tenant = "default",
    as_json: AsJson = False,
) -> None:
    """A unified diff of the system and user texts of two versions."""
    from parallax.runtime.storage.stores import prompts_in

    _name(name)

    async def work(store: BaseStore) -> tuple[dict[str, Any], dict[str, Any]]:
        prompts = prompts_in(store, tenant)
        return await prompts.get(name, a), await prompts.get(name, b)

    va, vb = with_store(work, tenant)
    parts = {
        part: list(
            difflib.unified_diff(
                va[part].splitlines(),
                vb[part].splitlines(),
                f"v{a} {part}",
                f"v{b} {part}",
                lineterm="",
            )
        )
        for part in ("system", "user")
    }
    if as_json:
        return emit({"name": name, "from": a, "to": b, **parts})
    for part, lines in parts.items():
        print("\n".join(lines) if lines else f"({part}: no change)")


async def gate_edit(
    name: str,
    system: str,
    user: str,
    tenant: str,
    val_tasks: list[TaskData],
    mode: str,
    playbook: str,
    approve: bool,
    by: str,
    context: Context,
) -> dict[str, Any]:
    """The gate of logic/prompt_gate.py on the CLI's store, with the solve graph compiled without a
    checkpointer."""
    from parallax.graphs.solve import builder
    from parallax.logic.prompt_gate import gate_edit as gate
    from parallax.runtime.run_context import resolved

    async with open_store(write=True) as store:
        return await gate(
            store,
            builder.compile(checkpointer=False),
            name,
            system,
            user,
            tenant,
            val_tasks,
            mode,
            playbook,
            approve,
            by,
            resolved(context),
        )


@prompts_app.command("set")
def set_(
    cli: typer.Context,
    name: NameArg,
    system_file: Annotated[
        Path | None, typer.Option("--system", help="File with the new system text.")
    ] = None,
    user_file: Annotated[
        Path | None, typer.Option("--user", help="File with the new user text.")
    ] = None,
    val: Annotated[Path | None, typer.Option(help="Validation tasks (JSONL) for the gate.")] = None,
    val_size: Annotated[int, typer.Option(help="Validation tasks to run.")] = 20,
    mode: Annotated[str, typer.Option(help="Solve mode of the validation runs.")] = "direct",
    playbook: Annotated[
        str, typer.Option(help="Playbook whose lessons the validation runs see.")
    ] = "default",
    approve: Annotated[
        bool, typer.Option("--approve", help="A person accepts the edit on a tie without signal.")
    ] = False,
    tenant: Tenant = "default",
    by: By = None,
    model: Model = None,
    base_url: BaseUrl = None,
    as_json: AsJson = False,
) -> None:
    """Add a version of prompt NAME from text files, through the gate; it reaches runs through
    `release`."""
    use_endpoint(cli, model, base_url)
    from parallax.logic.task_files import TaskFileError, load_tasks
    from parallax.runtime.storage.prompt_store import PromptStore
    from parallax.runtime.storage.stores import prompts_in

    _name(name)
    if system_file is None and user_file is None:
        fail("nothing to set: give --system FILE and/or --user FILE")
    for path in (system_file, user_file):
        if path is not None and not path.is_file():
            fail(f"file not found: {path}")
    if val_size < 1:
        fail(f"--val-size must be at least 1, got {val_size}")
    head = with_store(lambda store: prompts_in(store, tenant).head(name), tenant)
    system = read_utf8(system_file) if system_file else head["system"]
    user = read_utf8(user_file) if user_file else head["user"]
    if (system, user) == (head["system"], head["user"]):
        fail(f"prompt {name!r}: the texts equal the head (v{head['version']}): nothing to set")
    try:
        PromptStore.check_text(name, system, user)
    except StoreError as exc:
        fail(str(exc))
    tasks: list[TaskData] = []
    if val is not None:
        try:
            tasks = load_tasks(val)[0][:val_size]
        except TaskFileError as exc:
            fail(f"validation data: {exc}")
    if tasks and not as_json:
        err.print(
            f"gate: running {len(tasks)} validation tasks twice (v{head['version']} and the edit)…"
        )
    try:
        result = asyncio.run(
            gate_edit(
                name,
                system,
                user,
                tenant,
                tasks,
                mode,
                playbook,
                approve,
                by or who(),
                base_context(cli),
            )
        )
    except StoreError as exc:
        fail(str(exc))
    if as_json:
        emit({"name": name, **result})
    elif result["accepted"]:
        Console(highlight=False).print(
            f"prompt {name}: v{result['version']} accepted ({result['reason'] or 'gate passed'}); "
            f"release it with `parallax prompts release {name} {result['version']} --canary 10`"
        )
    else:
        Console(highlight=False).print(
            f"prompt {name}: edit rejected ({result['reason']}); kept as candidate "
            f"{result['candidate']}"
        )
    raise typer.Exit(0 if result["accepted"] else 1)


@prompts_app.command()
def rollback(
    name: NameArg,
    version: Annotated[int, typer.Argument(help="Version whose texts become the new head.")],
    tenant: Tenant = "default",
    by: By = None,
    reason: Reason = "",
    as_json: AsJson = False,
) -> None:
    """A new version equal to VERSION; if a production label is set, it moves there (recorded)."""
    from parallax.logic.releases import set_production
    from parallax.runtime.storage.stores import prompts_in

    _name(name)
    with_store(
        lambda store: prompts_in(store, tenant).get(name, version), tenant
    )  # refuse a bad version first

    async def work(store: BaseStore) -> dict[str, Any]:
        prompts = prompts_in(store, tenant)
        record = await prompts.rollback(name, version, by or who())
        if (await prompts.labels(name).get())["production"] is not None:
            await set_production(
                prompts.labels(name),
                record["version"],
                by or who(),
                reason or f"rollback to v{version}",
            )
        return record

    record = with_store(work, tenant, write=True)
    if as_json:
        return emit({k: v for k, v in record.items() if k not in ("system", "user")})
    Console().print(f"prompt {name}: v{record['version']} = v{version}")


add_release_commands(prompts_app, "prompt")
