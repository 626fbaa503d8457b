"""`parallax stats`: how runs are doing, from the stored traces, overall and per playbook version.

Reads the tenant's traces in the CLI's store (PARALLAX_HOME/store.sqlite); the metrics are
defined in parallax/logic/run_stats.py, and the `stats` graph returns the same object under
the graph API. `--plot` draws success, accuracy and p95 latency per version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from parallax.cli.common import AsJson, Tenant, check_output_dir, emit, fail, new_table, with_store, write_atomically

COLUMNS = (("runs", "runs"), ("ok", "ok_rate"), ("accuracy", "accuracy"), ("branches", "mean_branches"),
           ("calls", "mean_model_calls"), ("faults", "runs_with_faults"), ("recovery", "recovery_rate"),
           ("p50 ms", "latency_ms_p50"), ("p95 ms", "latency_ms_p95"), ("tokens", "tokens_total"),
           ("feedback", "feedback_mean"))


async def read_stats(store, tenant: str, since: str | None, playbook: str | None, version: int | None) -> dict:
    from parallax.logic.run_stats import parse_since, run_stats
    from parallax.runtime.storage.stores import traces_in

    when = parse_since(since)
    return {"tenant": tenant, **run_stats(await traces_in(store, tenant).traces(), when, playbook, version)}


def plot(result: dict, output: Path) -> None:
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
    ax.bar([x + width / 2 for x in xs], [r["accuracy"] or 0 for r in rows], width, label="accuracy (runs with a target)")
    ax.set_ylim(0, 1)
    ax.set_xticks(list(xs), labels, rotation=20)
    ax.legend(loc="upper left")
    latency = ax.twinx()
    latency.plot(list(xs), [r["latency_ms_p95"] or 0 for r in rows], "o-", color="tab:red", label="p95 ms")
    latency.set_ylabel("p95 latency (ms)", color="tab:red")
    ax.set_title(f"runs of tenant {result['tenant']} by playbook version")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    write_atomically(output, buf.getvalue())


def stats(
    since: Annotated[str | None, typer.Option(help="Only runs from this far back (7d, 12h, 30m, 2w) or since a date.")] = None,
    playbook: Annotated[str | None, typer.Option(help="Only runs of this playbook.")] = None,
    version: Annotated[int | None, typer.Option(help="Only runs served this playbook version.")] = None,
    tenant: Tenant = "default",
    plot_file: Annotated[Path | None, typer.Option("--plot", help="Also draw the per-version figures to this PNG file.")] = None,
    as_json: AsJson = False,
) -> None:
    """Run metrics: success rate, accuracy, branches and model calls per run, recovery, latency, tokens, feedback."""
    if plot_file is not None:
        if plot_file.suffix.lower() != ".png":
            fail(f"--plot must end in .png, got {plot_file.name}")
        check_output_dir(plot_file)
    result = with_store(lambda store: read_stats(store, tenant, since, playbook, version), tenant)
    if plot_file is not None:
        plot(result, plot_file)
    if as_json:
        return emit(result)
    table = new_table(f"runs of tenant {tenant}", ("playbook", "version") + tuple(c for c, _ in COLUMNS))
    for row in result["by_version"]:
        table.add_row(row["playbook"], f"v{row['version']}", *(str(row[k]) for _, k in COLUMNS))
    overall = result["overall"]
    table.add_row("all", "", *(str(overall[k]) for _, k in COLUMNS))
    Console().print(table)
    if plot_file is not None:
        Console(stderr=True).print(f"wrote {plot_file}")
