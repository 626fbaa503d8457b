"""`parallax playbook ...`: look at, compare, roll back, export, import and plot playbook versions.

Writers take the store's lock, so a rollback cannot interleave with a learn run's commit; read-only
commands on a home without a store use an empty in-memory one and write nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from parallax.cli.common import (
    CREATED_BY,
    AsJson,
    By,
    Name,
    Reason,
    Tenant,
    check_output_dir,
    emit,
    fail,
    read_utf8,
    require_known,
    who,
    with_playbooks,
    write_atomically,
)
from parallax.cli.tables import elide, gate_summary, new_table, print_table, when
from parallax.runtime.storage.namespaces import StoreError

if TYPE_CHECKING:
    from parallax.runtime.storage.playbook_store import Candidate, PlaybookStore
    from parallax.state.playbook import PlaybookVersion
    from parallax.state.release_record import LabelEvent

playbook_app = typer.Typer(
    help=(
        "Versioned playbooks: show, history, diff, rollback, export, import, candidates,"
        " quarantine, plot, release, canary."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def summary(v: PlaybookVersion) -> dict[str, Any]:
    return {
        "version": v.version,
        "parent": v.parent,
        "created_at": v.created_at,
        "items": len(v.active),
        "accepted": v.accepted,
        "created_by": v.created_by,
        "gate": v.gate,
        "note": v.note,
    }


@playbook_app.command()
def show(
    playbook: Name = "default",
    tenant: Tenant = "default",
    version: Annotated[int | None, typer.Option(help="Version (default: head).")] = None,
    all_items: Annotated[bool, typer.Option("--all", help="Include archived items.")] = False,
    as_json: AsJson = False,
) -> None:
    """Show the items of the head (or --version)."""

    async def work(store: PlaybookStore) -> PlaybookVersion:
        await require_known(store, playbook)
        return await (store.head(playbook) if version is None else store.get(playbook, version))

    pv = with_playbooks(work, tenant)
    if as_json:
        return emit(pv.model_dump(mode="json"))
    print_table(
        Console(),
        items_table(playbook, pv, all_items),
        f"no {'items' if all_items else 'active lessons'} yet; learn some from tasks with a known"
        f" answer: parallax learn TASKS.jsonl --playbook {playbook} (docs/learning.md)",
    )


def items_table(playbook: str, pv: PlaybookVersion, all_items: bool = False) -> Table:
    """A version's items, the lesson text wrapped at words (never cut: it is what the prompts
    get)."""
    table = new_table(
        f"playbook {playbook} v{pv.version} ({len(pv.active)} active items)",
        ("id", "section", "text", "+", "-") + (("status",) if all_items else ()),
        text=("section", "text"),
    )
    for i in pv.items if all_items else pv.active:
        table.add_row(
            i.id,
            i.section,
            i.text,
            str(i.helpful),
            str(i.harmful),
            *((i.status,) if all_items else ()),
        )
    return table


@playbook_app.command()
def history(
    playbook: Name = "default",
    tenant: Tenant = "default",
    with_candidates: Annotated[
        bool, typer.Option("--candidates", help="Also list rejected candidates.")
    ] = False,
    with_labels: Annotated[
        bool, typer.Option("--labels", help='Also list label moves (JSON rows with "label").')
    ] = False,
    as_json: AsJson = False,
) -> None:
    """List the versions, oldest first: parent, time, active items, who made it, gate metrics; and
    label moves."""

    async def work(store: PlaybookStore) -> tuple[list[dict[str, Any]], list[LabelEvent]]:
        await require_known(store, playbook)
        rows = [summary(v) for v in await store.history(playbook)]
        if with_candidates:
            rows += [
                {**summary(c), "candidate": c.candidate_id, "reason": c.reason}
                for c in await store.candidates(playbook)
            ]
        return (
            sorted(rows, key=lambda r: (r["created_at"], r["version"])),
            (await store.labels(playbook).get())["events"],
        )

    rows, events = with_playbooks(work, tenant)
    if as_json:
        return emit(rows + ([{**e, "created_at": e["at"]} for e in events] if with_labels else []))
    console = Console(highlight=False)
    print_table(
        console,
        history_table(playbook, rows),
        f"no versions yet: parallax learn TASKS.jsonl --playbook {playbook} makes the first",
    )
    for e in events:
        console.print(
            f"{e['at'][:19].replace('T', ' ')} label {e['label']}: {e['from']} -> {e['to']} by"
            f" {e['by']}: {e['why']}"
        )


def history_table(playbook: str, rows: list[dict[str, Any]]) -> Table:
    """Versions (and rejected candidates): the gate in a few words; `--json` has the whole
    record."""
    table = new_table(
        f"playbook {playbook}",
        ("v", "from", "created", "items", "by", "gate", "note"),
        text=("created", "by", "gate", "note"),
    )
    for r in rows:
        version = f"v{r['version']}" if r.get("candidate") is None else f"({r['version']})"
        table.add_row(
            version,
            str(r["parent"]),
            when(r["created_at"]),
            str(r["items"]),
            r["created_by"],
            gate_summary(r["gate"]) if r["accepted"] or r.get("candidate") else "not accepted",
            r["note"] + (f" (rejected candidate {r['candidate']})" if r.get("candidate") else ""),
        )
    return table


@playbook_app.command()
def diff(
    a: Annotated[int, typer.Argument(help="From version.")],
    b: Annotated[int, typer.Argument(help="To version.")],
    playbook: Name = "default",
    tenant: Tenant = "default",
    as_json: AsJson = False,
) -> None:
    """Items added, changed and archived from version A to version B."""

    async def work(store: PlaybookStore) -> dict[str, Any]:
        await require_known(store, playbook)
        return await store.diff(playbook, a, b)

    d = with_playbooks(work, tenant)
    if as_json:
        return emit(d)
    console = Console(highlight=False)
    console.print(
        f"playbook {playbook}: v{a} -> v{b}: {len(d['added'])} added, {len(d['changed'])} changed, "
        f"{len(d['archived'])} archived"
    )
    for i in d["added"]:
        console.print(f"[green]+ {i['id']}[/] {i['text']}")
    for c in d["changed"]:
        console.print(
            f"[yellow]~ {c['id']}[/] "
            + "; ".join(f"{f}: {c['before'][f]!r} -> {c['after'][f]!r}" for f in c["fields"])
        )
    for i in d["archived"]:
        console.print(f"[red]- {i['id']}[/] {i['text']}")


@playbook_app.command()
def rollback(
    version: Annotated[int, typer.Argument(help="Version whose items become the new head.")],
    playbook: Name = "default",
    tenant: Tenant = "default",
    by: By = None,
    reason: Reason = "",
    as_json: AsJson = False,
) -> None:
    """Make a new head version equal to VERSION (history keeps everything); a production label moves
    with it."""
    from parallax.logic.releases import set_production

    async def check(store: PlaybookStore) -> None:
        await require_known(store, playbook)
        await store.get(playbook, version)

    with_playbooks(check, tenant)  # refuse a bad version before opening the store for writing

    async def roll(store: PlaybookStore) -> PlaybookVersion:
        new = await store.rollback(playbook, version, by or CREATED_BY)
        if (await store.labels(playbook).get())["production"] is not None:
            await set_production(
                store.labels(playbook),
                new.version,
                by or who(),
                reason or f"rollback to v{version}",
            )
        return new

    new = with_playbooks(roll, tenant, write=True)
    if as_json:
        return emit(summary(new))
    Console().print(
        f"playbook {playbook}: v{new.version} = v{version} ({len(new.active)} active items)"
    )


@playbook_app.command()
def export(
    playbook: Name = "default",
    tenant: Tenant = "default",
    version: Annotated[int | None, typer.Option(help="Version (default: head).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="json | markdown")] = "json",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Write a version as JSON or Markdown (both importable)."""
    if fmt not in ("json", "markdown"):
        fail(f"unknown format {fmt!r}: use json or markdown")
    if output is not None:
        check_output_dir(output)

    async def work(store: PlaybookStore) -> str:
        await require_known(store, playbook)
        return await store.export(playbook, version, fmt)

    text = with_playbooks(work, tenant)
    if output is None:
        print(text, end="")
        return
    write_atomically(output, text.encode("utf-8"))
    if as_json:
        emit(
            {
                "playbook": playbook,
                "output": str(output),
                "format": fmt,
                "bytes": len(text.encode("utf-8")),
            }
        )
    else:
        Console(stderr=True).print(f"wrote {output}")


@playbook_app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="A JSON or Markdown export.")],
    playbook: Name = "default",
    tenant: Tenant = "default",
    as_json: AsJson = False,
) -> None:
    """Make a new version whose items are exactly FILE's."""
    if not file.is_file():
        fail(f"file not found: {file}")
    text = read_utf8(file)
    from parallax.runtime.storage.namespaces import check_playbook_name
    from parallax.runtime.storage.playbook_files import parse_playbook

    try:
        check_playbook_name(playbook)
    except StoreError as exc:
        fail(str(exc))
    try:
        parse_playbook(text)  # refuse a bad file before creating a store
    except StoreError as exc:
        fail(f"{file}: {exc}")
    new = with_playbooks(
        lambda store: store.import_(playbook, text, CREATED_BY), tenant, write=True
    )
    if as_json:
        return emit(summary(new))
    held = new.gate.get("quarantined", 0)
    Console().print(
        f"playbook {playbook}: imported {len(new.items)} items as v{new.version}"
        + (f"; {held} quarantined (see `parallax playbook quarantine`)" if held else "")
    )


@playbook_app.command()
def candidates(
    playbook: Name = "default", tenant: Tenant = "default", as_json: AsJson = False
) -> None:
    """List updates the gate rejected, with their reasons."""

    async def work(store: PlaybookStore) -> list[Candidate]:
        await require_known(store, playbook)
        return await store.candidates(playbook)

    found = with_playbooks(work, tenant)
    if as_json:
        return emit(
            [
                {
                    **summary(c),
                    "candidate": c.candidate_id,
                    "reason": c.reason,
                    "operations": len(c.operations),
                }
                for c in found
            ]
        )
    print_table(
        Console(), candidates_table(playbook, found), "none: no candidate version has been rejected"
    )


def candidates_table(playbook: str, found: list[Candidate]) -> Table:
    table = new_table(
        f"rejected candidates of {playbook}",
        ("candidate", "on", "created", "items", "ops", "reason"),
        text=("created", "reason"),
    )
    for c in found:
        table.add_row(
            c.candidate_id,
            f"v{c.parent}",
            when(c.created_at),
            str(len(c.active)),
            str(len(c.operations)),
            c.reason,
        )
    return table


@playbook_app.command()
def quarantine(
    playbook: Name = "default", tenant: Tenant = "default", as_json: AsJson = False
) -> None:
    """List lessons that failed the prompt-injection screen: never applied, kept with the reason."""

    async def work(store: PlaybookStore) -> list[dict[str, Any]]:
        await require_known(store, playbook)
        return await store.quarantined(playbook)

    held = with_playbooks(work, tenant)
    if as_json:
        return emit(held)
    print_table(
        Console(), quarantine_table(playbook, held), "none: no lesson failed the injection screen"
    )


def quarantine_table(playbook: str, held: list[dict[str, Any]]) -> Table:
    table = new_table(
        f"quarantined lessons of {playbook} ({len(held)})",
        ("id", "created", "source", "reason", "text"),
        text=("created", "source", "reason", "text"),
    )
    for q in held:
        table.add_row(
            q["id"], when(q["created_at"]), q["source"], q["reason"], elide(q["text"], 200)
        )
    return table


def accuracy(gate: dict[str, Any]) -> float | None:
    for key in ("val_accuracy_after", "val_accuracy"):
        if isinstance(gate.get(key), (int, float)):
            return float(gate[key])
    return None


@playbook_app.command()
def plot(
    output: Annotated[Path, typer.Option("--output", "-o", help="PNG file to write.")],
    playbook: Name = "default",
    tenant: Tenant = "default",
    as_json: AsJson = False,
) -> None:
    """Plot validation accuracy (from each version's gate) and active item count per version."""
    if output.suffix.lower() != ".png":
        fail(f"--output must end in .png, got {output.name}")
    check_output_dir(output)

    async def work(store: PlaybookStore) -> list[PlaybookVersion]:
        await require_known(store, playbook)
        return await store.history(playbook)

    versions = with_playbooks(work, tenant)
    if not versions:
        fail(f"playbook {playbook!r} has no versions to plot: run `parallax learn` first")
    import io

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    xs = [v.version for v in versions]
    acc = [(v.version, a) for v in versions if (a := accuracy(v.gate)) is not None]
    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.add_subplot()
    ax.set_xlabel("version")
    ax.set_ylabel("validation accuracy", color="tab:blue")
    if acc:
        ax.plot(
            [x for x, _ in acc], [y for _, y in acc], "o-", color="tab:blue", label="val accuracy"
        )
    ax.set_ylim(0, 1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    counts = ax.twinx()
    counts.set_ylabel("active items", color="tab:orange")
    counts.step(
        xs, [len(v.active) for v in versions], where="mid", color="tab:orange", label="items"
    )
    counts.set_ylim(bottom=0)
    ax.set_title(f"playbook {playbook}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    write_atomically(output, buf.getvalue())
    if as_json:
        emit(
            {
                "playbook": playbook,
                "output": str(output),
                "versions": len(xs),
                "with_accuracy": len(acc),
            }
        )
    else:
        Console(stderr=True).print(f"wrote {output} ({len(xs)} versions, {len(acc)} with accuracy)")
