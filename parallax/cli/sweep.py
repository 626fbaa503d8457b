"""`parallax sweep`: one retention sweep of a deployment's database (docs/retention.md).

It takes the replicas' advisory lock "sweep", so it waits for a replica's sweep instead of sweeping
beside it.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from typing import Annotated

import typer

from parallax.cli.common import AsJson, err, fail
from parallax.runtime import settings as settings_mod
from parallax.runtime.storage import retention

Days = float | None


def sweep(
    threads_days: Annotated[
        Days,
        typer.Option(
            "--threads-days",
            min=0.0,
            help="Delete threads idle longer (PARALLAX_RETAIN_THREADS_DAYS).",
        ),
    ] = None,
    checkpoints_days: Annotated[
        Days,
        typer.Option(
            "--checkpoints-days",
            min=0.0,
            help="Delete checkpoint history older; each thread keeps its latest "
            "(PARALLAX_RETAIN_CHECKPOINTS_DAYS).",
        ),
    ] = None,
    traces_days: Annotated[
        Days,
        typer.Option(
            "--traces-days",
            min=0.0,
            help="Delete traces written longer ago (PARALLAX_RETAIN_TRACES_DAYS).",
        ),
    ] = None,
    dead_letters_days: Annotated[
        Days,
        typer.Option(
            "--dead-letters-days",
            min=0.0,
            help="Delete dead letters written longer ago (PARALLAX_RETAIN_DEAD_LETTERS_DAYS).",
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Delete what is older than the retention limits from the deployment's PostgreSQL
    (DATABASE_URL), once."""
    from parallax.runtime.storage.namespaces import StoreError
    from parallax.runtime.storage.postgres import conninfo

    settings = settings_mod.load()
    url = os.environ.get("DATABASE_URL") or settings.database_url
    if not url:
        fail("set DATABASE_URL (or PARALLAX_DATABASE_URL) to the deployment's PostgreSQL database")
    try:
        url = conninfo(url)
    except StoreError as exc:
        fail(str(exc))
    limits = retention.from_settings(settings)
    limits = replace(
        limits,
        threads_days=limits.threads_days if threads_days is None else threads_days,
        checkpoints_days=limits.checkpoints_days if checkpoints_days is None else checkpoints_days,
        traces_days=limits.traces_days if traces_days is None else traces_days,
        dead_letters_days=(
            limits.dead_letters_days if dead_letters_days is None else dead_letters_days
        ),
    )
    try:
        swept = asyncio.run(_sweep(url, limits))
    except ImportError:
        fail("PostgreSQL support is not installed: pip install -e '.[postgres]' (or '.[server]')")
    except Exception as exc:  # noqa: BLE001 - a database that cannot be reached: one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        fail(f"cannot sweep the database at {url.split('@')[-1]!r}: {first}", code=1)
    out = {
        **swept.as_dict(),
        "limits_days": {k: v for k, v in vars(limits).items() if k.endswith("_days")},
    }
    if as_json:
        print(json.dumps(out))
    else:
        err.print(
            "swept "
            + ", ".join(f"{getattr(swept, k)} {k.replace('_', ' ')}" for k in retention.KINDS)
            + f" in {swept.seconds:.1f}s",
            highlight=False,
        )


async def _sweep(url: str, limits: retention.Retention) -> retention.Swept:
    import psycopg

    from parallax.runtime.storage.postgres import PostgresCommitLock

    async with PostgresCommitLock(url, timeout=3600).hold("sweep"):
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            return await retention.sweep(conn, limits)
