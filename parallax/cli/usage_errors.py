"""Click's own usage errors (`--port 0`, an unknown option) in Parallax's one-line `error:` form."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from typer.core import TyperGroup

try:  # typer vendors click since 0.2x (its exceptions are typer._click's, not the click package's)
    from typer import _click as click
except ImportError:  # pragma: no cover  (an older typer on the click package)
    import click  # type: ignore[no-redef]


class ErrorLine(click.ClickException):
    """A click exception shown with Parallax's `error:` prefix (usage and hint first, as click
    does)."""

    def __init__(self, original: click.ClickException) -> None:
        super().__init__(original.format_message())
        self.exit_code = original.exit_code
        self.ctx: click.Context | None = getattr(original, "ctx", None)

    def show(self, file: IO[Any] | None = None) -> None:
        from parallax.cli.common import err

        if self.ctx is not None:
            hint = ""
            if self.ctx.command.get_help_option(self.ctx) is not None:
                names = self.ctx.command.get_help_option_names(self.ctx)
                hint = f"Try '{self.ctx.command_path} {max(names, key=len)}' for help.\n"
            click.echo(f"{self.ctx.get_usage()}\n{hint}", file=file, err=True)
        from rich.markup import escape

        err.print(f"[bold red]error:[/] {escape(self.message)}", highlight=False, soft_wrap=True)


@contextmanager
def one_prefix() -> Iterator[None]:
    try:
        yield
    except ErrorLine:
        raise
    except click.ClickException as exc:
        raise ErrorLine(exc) from exc


class ParallaxGroup(TyperGroup):
    """The root `parallax` group: its own parsing and every subcommand's run under `one_prefix`."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with one_prefix():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with one_prefix():
            return super().invoke(ctx)
