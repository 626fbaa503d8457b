"""`parallax --version`: the installed distribution's version, read from the package metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import typer

DISTRIBUTION = "parallax-graph"
"""The name pip knows Parallax by (`parallax` on PyPI is another project); the import name and the
command are `parallax`."""


def installed_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


def print_version(value: bool) -> None:
    """Eager option callback: print `parallax X.Y.Z` and stop before any command (or settings check)
    runs."""
    if value:
        typer.echo(f"parallax {installed_version()}")
        raise typer.Exit(0)
