"""`parallax --version`: the installed distribution's version, as `gh`, `uv` and `httpie` print theirs.

Read from the package metadata (pyproject's `version`), not from a constant in the code, so
the number a user reports is the one pip installed.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import typer

DISTRIBUTION = "parallax-graph"
"""The name pip knows Parallax by (`parallax` on PyPI is another project); the import name and the command are
`parallax`."""


def installed_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


def print_version(value: bool) -> None:
    """Eager option callback: print `parallax X.Y.Z` and stop before any command (or settings check) runs."""
    if value:
        typer.echo(f"parallax {installed_version()}")
        raise typer.Exit(0)
