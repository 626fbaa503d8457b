"""What `parallax run` shows while it works: branch counts, or its plan's tree with live status."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.live import Live
from rich.tree import Tree

from parallax.cli.common import err
from parallax.cli.tables import elide

if TYPE_CHECKING:
    from rich.status import Status

STATUS_STYLE = {
    "PENDING": "dim",
    "RUNNING": "yellow",
    "DONE": "green",
    "NEEDS_REVIEW": "magenta",
    "FAILED": "red",
    "SKIPPED": "red dim",
}


def plan_tree(
    plan: dict[str, Any], statuses: dict[int, dict[str, Any]], title: str = "plan"
) -> Tree:
    """The plan as a tree: each task under its last dependency, with its status (and why)."""
    from rich.markup import escape

    tree = Tree(f"[bold]{title}[/] ({plan.get('synthesis', 'concat')})")
    nodes: dict[int, Tree] = {}
    for task in plan["tasks"]:
        seen = statuses.get(task["id"], {})
        status = seen.get("status", "PENDING")
        deps = task.get("deps", [])
        label = (
            f"[{STATUS_STYLE.get(status, '')}]{status}[/] {task['id']} "
            f"{task.get('kind', 'solve')}: {escape(elide(task['goal'], 70))}"
            + (f" [dim](after {', '.join(map(str, deps))})[/]" if deps else "")
            + (
                f" [dim]- {escape(elide(seen['reason'], 80))}[/]"
                if seen.get("reason") and status in ("FAILED", "SKIPPED")
                else ""
            )
        )
        known = [d for d in deps if d in nodes]
        parent = nodes[max(known)] if known else tree
        nodes[task["id"]] = parent.add(label)
    return tree


class Progress:
    """What a run shows on stderr while it works: branch counts, or the plan's live tree."""

    def __init__(self, status: Status, live: Live | None) -> None:
        self.status, self.live, self.done = status, live, 0
        self.plan: dict[str, Any] | None = None
        self.tasks: dict[int, dict[str, Any]] = {}
        self.round = 0

    def update(self, node: str, update: dict[str, Any]) -> None:
        if node == "route":
            err.print(
                f"route: [bold]{update['mode']}[/]"
                + (f" ({len(update['slices'])} slices)" if update["slices"] else "")
            )
        if node == "make_plan" and update.get("plan"):
            self.plan, self.tasks, self.round = update["plan"], {}, update.get("round", self.round)
            self._redraw()
        from langgraph.types import Overwrite

        branches = update.get("branches") or []
        for record in (
            branches.value if isinstance(branches, Overwrite) else branches
        ):  # route starts a run empty
            self.done += 1
            self.status.update(
                f"{self.done} branches done (last: {record['kind']} {record['status']})"
            )

    def task(self, event: dict[str, Any]) -> None:
        if event.get("round", 0) == self.round:
            self.tasks[event["id"]] = event
            self._redraw()

    def _redraw(self) -> None:
        if self.live is not None and self.plan is not None:
            self.live.update(plan_tree(self.plan, self.tasks, f"plan (round {self.round})"))
