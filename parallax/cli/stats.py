"""`parallax stats`: how runs are doing, from the stored traces, overall and per playbook version.

The metrics are parallax/logic/run_stats.py's; `--plot` draws success, accuracy and p95 latency.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from parallax.cli.common import (
    AsJson,
    Tenant,
    cell,
    check_output_dir,
    emit,
    fail,
    with_store,
    write_atomically,
)
from parallax.cli.tables import new_table

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

METRICS = (
    ("runs", "runs", "count"),
    ("ok", "ok_rate", "share"),
    ("accuracy (runs with a target)", "accuracy", "share"),
    ("branches per run", "mean_branches", "mean"),
    ("model calls per run", "mean_model_calls", "mean"),
    ("runs that met a fault", "runs_with_faults", "count"),
    ("of those, ended ok", "recovery_rate", "share"),
    ("p50 latency ms", "latency_ms_p50", "ms"),
    ("p95 latency ms", "latency_ms_p95", "ms"),
    ("tokens", "tokens_total", "count"),
    ("cost USD (runs with a price)", "cost_usd_total", "usd"),
    ("runs of unknown cost (no price)", "cost_unknown_runs", "count"),
    ("runs stopped by their budget", "budget_stops", "count"),
    ("feedback (mean score)", "feedback_mean", "mean"),
)
"""The table's rows: one per metric (its columns are the versions), so it reads on an 80-column
terminal."""


async def read_stats(
    store: BaseStore, tenant: str, since: str | None, playbook: str | None, version: int | None
) -> dict[str, Any]:
    from parallax.logic.run_stats import parse_since, run_stats
    from parallax.runtime.storage.stores import traces_in

    when = parse_since(since)
    return {
        "tenant": tenant,
        **run_stats(await traces_in(store, tenant).traces(), when, playbook, version),
    }


def plot(result: dict[str, Any], output: Path) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rows = result["by_version"]
    labels = [f"{r['playbook']} v{r['version']}" for r in rows]
    xs = range(len(rows))
    fig = Figure(figsize=(max(6, len(rows) * 1.2), 4), dpi=100)
    ax = fig.add_subplot()
    width = 0.4
    ax.bar([x - width / 2 for x in xs], [r["ok_rate"] or 0 for r in rows], width, label="ok rate")
    ax.bar(
        [x + width / 2 for x in xs],
        [r["accuracy"] or 0 for r in rows],
        width,
        label="accuracy (runs with a target)",
    )
    ax.set_ylim(0, 1)
    ax.set_xticks(list(xs), labels, rotation=20)
    ax.legend(loc="upper left")
    latency = ax.twinx()
    latency.plot(
        list(xs), [r["latency_ms_p95"] or 0 for r in rows], "o-", color="tab:red", label="p95 ms"
    )
    latency.set_ylabel("p95 latency (ms)", color="tab:red")
    ax.set_title(f"runs of tenant {result['tenant']} by playbook version")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    write_atomically(output, buf.getvalue())


def stats_table(tenant: str, result: dict[str, Any]) -> Table:
    """One row per metric, one column per playbook version and one for all runs."""
    groups = [(f"{row['playbook']} v{row['version']}", row) for row in result["by_version"]] + [
        ("all", result["overall"])
    ]
    table = new_table(f"runs of tenant {tenant}", ("", *(name for name, _ in groups)), text=("",))
    for label, key, kind in METRICS:
        table.add_row(label, *(cell(row[key], kind) for _, row in groups))
    return table


def stats(
    since: Annotated[
        str | None,
        typer.Option(help="Only runs from this far back (7d, 12h, 30m, 2w) or since a date."),
    ] = None,
    playbook: Annotated[str | None, typer.Option(help="Only runs of this playbook.")] = None,
    version: Annotated[
        int | None, typer.Option(help="Only runs served this playbook version.")
    ] = None,
    tenant: Tenant = "default",
    plot_file: Annotated[
        Path | None,
        typer.Option("--plot", help="Also draw the per-version figures to this PNG file."),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Run metrics: success rate, accuracy, branches and model calls per run, recovery, latency,
    tokens, feedback."""
    if plot_file is not None:
        if plot_file.suffix.lower() != ".png":
            fail(f"--plot must end in .png, got {plot_file.name}")
        check_output_dir(plot_file)
    result = with_store(lambda store: read_stats(store, tenant, since, playbook, version), tenant)
    if plot_file is not None:
        plot(result, plot_file)
    if as_json:
        return emit(result)
    Console().print(stats_table(tenant, result))
    if plot_file is not None:
        Console(stderr=True).print(f"wrote {plot_file}")
