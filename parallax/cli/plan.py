"""`parallax plan show TRACE_ID`: a plan run's DAG, as Mermaid text or a PNG.

Each task is a node (id, kind, final status, goal), each dependency an arrow; the PNG is drawn with
matplotlib, one column per depth, tasks coloured by status.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from parallax.cli.common import Tenant, check_output_dir, fail, write_atomically
from parallax.cli.trace import with_traces

if TYPE_CHECKING:
    from parallax.state.trace_record import TraceRecord, TraceTask

plan_app = typer.Typer(
    help="Plan runs: show a run's DAG of tasks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

COLOURS = {
    "DONE": "#b7e4c7",
    "NEEDS_REVIEW": "#e0c3fc",
    "FAILED": "#f4a3a3",
    "SKIPPED": "#e5e5e5",
    "PENDING": "#ffffff",
    "RUNNING": "#ffe8a3",
}


def _final_tasks(trace: TraceRecord) -> dict[int, TraceTask]:
    tasks = trace.get("tasks") or []
    last = max((t["round"] for t in tasks), default=0)
    return {t["id"]: t for t in tasks if t["round"] == last}


def _status_of(records: dict[int, TraceTask], task_id: int) -> str:
    """A task's status in the last round; PENDING when it has no record there."""
    record = records.get(task_id)
    return record["status"] if record is not None else "PENDING"


def _label(task: dict[str, Any], status: str) -> str:
    goal = task["goal"].replace('"', "'").replace("\n", " ")
    goal = goal[:60] + ("…" if len(goal) > 60 else "")
    return f"{task['id']} · {task.get('kind', 'solve')} · {status}<br/>{goal}"


def mermaid(trace: TraceRecord) -> str:
    """The plan of `trace` as a Mermaid flowchart (statuses of the last round as classes)."""
    plan, records = trace["plan"], _final_tasks(trace)
    lines = ["graph TD"]
    for task in plan["tasks"]:
        lines.append(f'    t{task["id"]}["{_label(task, _status_of(records, task["id"]))}"]')
    for task in plan["tasks"]:
        lines += [f"    t{dep} --> t{task['id']}" for dep in task.get("deps", [])]
    for status, colour in COLOURS.items():
        lines.append(f"    classDef {status} fill:{colour},stroke:#555")
    for task in plan["tasks"]:
        lines.append(f"    class t{task['id']} {_status_of(records, task['id'])}")
    return "\n".join(lines) + "\n"


def png(trace: TraceRecord) -> bytes:
    """The plan drawn as a PNG: depth from left to right, arrows for dependencies."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from parallax.logic.plan_check import levels
    from parallax.state.plan import Plan

    plan = Plan.model_validate(trace["plan"])
    depth, records = levels(plan), _final_tasks(trace)
    columns: dict[int, list[int]] = {}
    for task in plan.tasks:
        columns.setdefault(depth[task.id], []).append(task.id)
    where = {i: (d * 3.2, -row * 1.4) for d, ids in columns.items() for row, i in enumerate(ids)}
    height = max(len(ids) for ids in columns.values())
    fig, ax = plt.subplots(figsize=(max(4, 3.4 * len(columns)), max(2.5, 1.5 * height)))
    for task in plan.tasks:
        for dep in task.deps:
            (x0, y0), (x1, y1) = where[dep], where[task.id]
            ax.annotate(
                "",
                xy=(x1 - 1.25, y1),
                xytext=(x0 + 1.25, y0),
                arrowprops={"arrowstyle": "->", "color": "#555"},
            )
    for task in plan.tasks:
        status = _status_of(records, task.id)
        x, y = where[task.id]
        ax.text(
            x,
            y,
            f"{task.id} {task.kind} · {status}\n{task.goal[:34]}",
            ha="center",
            va="center",
            fontsize=8,
            bbox={
                "boxstyle": "round",
                "facecolor": COLOURS.get(status, "#fff"),
                "edgecolor": "#555",
            },
        )
    ax.set_xlim(-1.6, max(x for x, _ in where.values()) + 1.6)
    ax.set_ylim(min(y for _, y in where.values()) - 0.9, 0.9)
    ax.axis("off")
    ax.set_title(f"plan {trace['trace_id'][:12]}: {trace.get('status')}", fontsize=10)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


@plan_app.command("show")
def show(
    trace_id: Annotated[str, typer.Argument(help="The trace id a plan run printed.")],
    tenant: Tenant = "default",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write a PNG drawing here instead of printing Mermaid."
        ),
    ] = None,
) -> None:
    """Print a plan run's DAG as Mermaid (paste it into any Mermaid viewer), or draw it as a PNG
    with --output."""
    if output is not None:
        if output.suffix.lower() != ".png":
            fail(f"--output {output}: give a .png file name")
        check_output_dir(output)
    trace = with_traces(lambda traces: traces.get_trace(trace_id), tenant)
    if not trace.get("plan"):
        fail(f"trace {trace_id!r} is a {trace.get('mode')} run, not a plan run: nothing to draw")
    if output is None:
        print(mermaid(trace), end="")
        return
    write_atomically(output, png(trace))
    typer.echo(f"wrote {output}")
