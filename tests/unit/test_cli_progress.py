"""What `parallax run` shows in a terminal while it works: the route's update, which empties the
branches reducer with None, must not stop the run (it did: `TypeError: 'NoneType' object is not
iterable`).
"""

from __future__ import annotations

import io

from rich.console import Console

from parallax.cli import run as run_cli
from parallax.state.solve import NEW_RUN


class Status:
    def __init__(self) -> None:
        self.shown: list[str] = []

    def update(self, text: str) -> None:
        self.shown.append(text)


def test_progress_takes_the_route_update_and_counts_branches(monkeypatch):
    monkeypatch.setattr(run_cli, "err", Console(file=io.StringIO()))
    status = Status()
    progress = run_cli.Progress(status, live=None)
    progress.update("route", {**NEW_RUN, "mode": "vote", "slices": []})
    progress.update(
        "work", {"branches": [{"kind": "vote", "status": "ok"}, {"kind": "vote", "status": "ok"}]}
    )
    assert progress.done == 2 and status.shown[-1] == "2 branches done (last: vote ok)"
