"""What every `parallax` command shares: errors, output, options, stores. Imports no command.

Errors are one line on stderr (exit 2 for bad input, nothing written); `--json` prints one object. A
caller may hand in the base `Context` with `app(obj=Context(...))`.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from parallax.runtime.storage.namespaces import NotFound, StoreError, check_tenant
from parallax.state.context import Context

if TYPE_CHECKING:
    from collections.abc import Mapping

    from langgraph.store.base import BaseStore

    from parallax.logic.input_rules import InvalidInput
    from parallax.runtime.storage.playbook_store import PlaybookStore

T = TypeVar("T")

err = Console(stderr=True)
CREATED_BY = "cli"

Name = Annotated[str, typer.Option("--playbook", help="Playbook name.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
Tenant = Annotated[
    str,
    typer.Option(
        "--tenant",
        envvar="PARALLAX_TENANT",
        help="Whose playbooks (and traces) to use; tenants never see each other's.",
    ),
]


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and an exit code; no traceback. The message is printed as written
    (brackets too)."""
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def located(exc: StoreError) -> str:
    """A store error as one line; a "not found" also names the store it searched."""
    from parallax.runtime.storage.stores import cli_store_location

    return f"{exc} (searched {cli_store_location()})" if isinstance(exc, NotFound) else str(exc)


def no_store_yet(what: str = "runs") -> NoReturn:
    """Exit 2 for a command that reads a store nothing has written yet, naming where it looked."""
    from parallax.runtime.storage.stores import cli_store_location

    fail(
        f"no {what} recorded yet: searched {cli_store_location()}; run `parallax run` first "
        "(or set PARALLAX_DATABASE_URL for a deployment's runs)"
    )


def emit(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False))


def cell(value: float | None, kind: str) -> str:
    """A figure as a table shows it: `share` as a percentage, `mean` with two decimals, `usd` as
    dollars, else a whole number with thousands separators; None (nothing to measure) as "-". JSON
    keeps the exact values.
    """
    if value is None:
        return "-"
    if kind == "share":
        return f"{value:.1%}"
    if kind == "mean":
        return f"{value:.2f}"
    if kind == "usd":
        return f"${value:,.4f}"
    return f"{value:,.0f}"


def base_context(cli: typer.Context | None, **overrides: Any) -> Context:
    """The run Context of a command: the caller's (`app(obj=Context(...))`) or a default, plus
    overrides (an override of None, a flag the user did not give, leaves the field as it was)."""
    import dataclasses

    given = cli.find_object(Context) if cli is not None else None
    return dataclasses.replace(
        given or Context(), **{k: v for k, v in overrides.items() if v is not None}
    )


def as_option(exc: InvalidInput, options: Mapping[str, str]) -> str:
    """A refusal of logic/run_input.py as a command says it: the input field or run setting it
    names, said as the command's option that sets it (`votes must be ...` -> `--votes must be ...`);
    the rest of the sentence is the one every face says."""
    text, option = str(exc), options.get(exc.field or "")
    return (
        option + text[len(exc.field or "") :]
        if option and exc.field and text.startswith(exc.field + " ")
        else text
    )


def checked_options(context: Context, options: Mapping[str, str]) -> Context:
    """`context`, its run settings within their bounds (logic/run_input.py `checked_context`); else
    one line naming the option, exit 2."""
    from parallax.logic.run_input import RunInputError, checked_context

    try:
        checked_context(context)
        return context
    except RunInputError as exc:
        fail(as_option(exc, options))


EarlyStop = Annotated[
    bool | None,
    typer.Option(
        "--early-stop/--no-early-stop",
        help=(
            "Ask a vote's branches in waves and stop once the leading answer is settled, so --votes"
            " is the most asked; in speculate mode, cancel the other candidates once one passes its"
            " check (default: on, PARALLAX_EARLY_STOP)."
        ),
    ),
]
Votes = Annotated[
    int | None, typer.Option(help="Most vote branches of a vote-mode run (default 5).")
]


def checked_tenant(tenant: str) -> str:
    """The tenant name, or a one-line exit 2 before anything is opened."""
    try:
        return check_tenant(tenant)
    except StoreError as exc:
        fail(str(exc))


def check_output_dir(path: Path) -> None:
    if not path.parent.is_dir():
        fail(f"output directory does not exist: {path.parent}")


def write_atomically(path: Path, data: bytes) -> None:
    """Temp file in the target directory, then os.replace: readers never see half a file."""
    check_output_dir(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_utf8(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{path} is not UTF-8 text (byte {exc.start}): convert it, e.g. with iconv -t utf-8")


@asynccontextmanager
async def open_playbooks(write: bool, tenant: str = "default") -> AsyncIterator[PlaybookStore]:
    """The tenant's playbooks in the CLI's store (see `open_store`)."""
    from parallax.runtime.storage.stores import playbooks_in

    async with open_store(write) as store:
        yield playbooks_in(store, tenant)


def with_playbooks(
    work: Callable[[PlaybookStore], Awaitable[T]], tenant: str, write: bool = False
) -> T:
    """Run `work(playbooks)` on the tenant's playbooks; errors as `with_store`."""
    from parallax.runtime.storage.stores import playbooks_in

    return with_store(lambda store: work(playbooks_in(store, tenant)), tenant, write)


async def require_known(playbooks: PlaybookStore, name: str) -> None:
    """A typo'd --playbook should not quietly show an empty playbook; 'default' may be empty."""
    from parallax.runtime.storage.playbook_store import PlaybookNotFound

    if name != "default" and name not in await playbooks.names():
        known = ", ".join(await playbooks.names()) or "none yet"
        raise PlaybookNotFound(f"unknown playbook {name!r} (known: {known}): check --playbook")


def who() -> str:
    """Who is moving a label, for the history: the login name, else "cli"."""
    import getpass

    try:
        return getpass.getuser() or CREATED_BY
    except (KeyError, OSError):
        return CREATED_BY


By = Annotated[
    str | None,
    typer.Option("--by", help="Who is doing this, for the history (default: your login name)."),
]
Reason = Annotated[str, typer.Option("--reason", help="Why, for the history.")]


@asynccontextmanager
async def open_store(
    write: bool, missing: Callable[[], None] | None = None
) -> AsyncIterator[BaseStore]:
    """The CLI's store (the deployment's PostgreSQL store with PARALLAX_DATABASE_URL). Reading a
    home without a store creates nothing: `missing()` is called (it may exit, e.g. `no_store_yet`),
    else an empty in-memory store stands in."""
    from langgraph.store.memory import InMemoryStore

    from parallax.runtime.storage.stores import has_cli_store, open_cli_store

    if not write and not has_cli_store():
        if missing is not None:
            missing()
        yield InMemoryStore()
        return
    async with open_cli_store() as store:
        yield store


def with_store(
    work: Callable[[BaseStore], Awaitable[T]],
    tenant: str,
    write: bool = False,
    missing: Callable[[], None] | None = None,
) -> T:
    """The commands' one way to a store: check the tenant, open the store (`open_store`), run
    `work(store)`; a StoreError or a bad value becomes a one-line exit 2."""
    checked_tenant(tenant)

    async def main() -> T:
        async with open_store(write, missing) as store:
            return await work(store)

    try:
        return asyncio.run(main())
    except StoreError as exc:
        fail(located(exc))
    except ValueError as exc:
        fail(str(exc))


def durable_graph(builder: Any) -> Any:
    """The commands' one way to a durable graph (runtime/storage/stores.py), imported when a command
    runs one."""
    from parallax.runtime.storage.stores import durable_graph as compiled

    return compiled(builder)


@contextmanager
def graph_failures(*bad_input: type[BaseException]) -> Iterator[None]:
    """How a command reports a graph run that could not go on: its input (`bad_input`) as one line
    and exit 2, the embedded model server as one line and exit 1."""
    from parallax.runtime.model_server import ModelServerError

    try:
        yield
    except bad_input as exc:
        fail(str(exc))
    except ModelServerError as exc:
        fail(f"model server: {exc}", code=1)


MaxCost = Annotated[
    float | None,
    typer.Option(
        help=(
            "The run's budget in US dollars, all its model calls together, at the price table"
            " (PARALLAX_PRICES). Each request is held at its worst case before it is sent, shrunk"
            " or not sent: the run never spends past it, and ends needs_review, 'budget reached',"
            " with what it has."
        )
    ),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        help=(
            "The run's budget in tokens (prompt plus completion, all model calls), held as"
            " --max-cost is. Not the per-reply cap (PARALLAX_MAX_TOKENS)."
        )
    ),
]
