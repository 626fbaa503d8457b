"""What `parallax learn` says while it runs and when it ends.

Progress bars on a terminal, one plain line per event elsewhere, then one sentence on what was
learned or why not (docs/internals/cli.md#output-for-people).
"""

from __future__ import annotations

import time
from collections import Counter
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

CAUSES = {
    "length": "stopped at the token limit",
    "timeout": "timed out",
    "parse": "not the JSON asked for",
    "connection": "endpoint unreachable",
    "rate_limit": "rate-limited",
    "server_error": "endpoint error",
    "client_error": "request refused",
    "circuit_open": "endpoint paused after failures",
    "crash": "crashed",
}
"""A failed run's cause (runtime/failure_cause.py) in words."""


def in_words(cause: str | None) -> str:
    return CAUSES.get(cause or "", cause or "failed")


class LearnProgress:
    """Shows a learn run's events as they come: bars on a terminal, plain lines elsewhere (see the
    module doc)."""

    def __init__(self, console: Console, enabled: bool) -> None:
        self.console, self.enabled = console, enabled
        self.plain = not console.is_terminal
        self.started = time.perf_counter()
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled or self.plain,
            transient=False,
        )
        self.bar: TaskID | None = None
        self.phase = ""
        self.done = 0
        self.sizes: list[int] = []
        self.batch = 0
        self.version = 0

    def __enter__(self) -> LearnProgress:
        self.bars.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.bars.__exit__(kind, value, tb)

    def say(self, text: str) -> None:
        """One line; on a terminal above the bars, elsewhere with the seconds since the start."""
        if not self.enabled:
            return
        if self.plain:
            self.console.print(
                f"{time.perf_counter() - self.started:4.0f}s  {text}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        else:
            self.bars.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def _phase(self, phase: str, description: str, total: int) -> None:
        self.phase, self.done = phase, 0
        self.bar = self.bars.add_task(description, total=total)

    def starting(self, what: str) -> None:
        """The line printed before the graph starts (the plan as the CLI knows it)."""
        self.say(what)

    def event(self, event: dict[str, Any]) -> None:
        """One event of the learn graph's custom stream."""
        kind, total = event.get("learn"), int(event.get("total", 0))
        batches = len(self.sizes)
        if kind == "start":
            self.sizes, self.version = (
                [int(n) for n in event.get("batch_sizes", [])],
                int(event.get("version", 0)),
            )
            if total:
                self._phase("baseline", f"validation of v{self.version}", total)
                self.say(
                    f"measuring playbook v{self.version} on {total} validation tasks (the gate's"
                    " baseline)"
                )
        elif kind == "validation":
            if event.get("of") == "candidate" and self.phase != "candidate":
                self._phase("candidate", f"batch {self.batch}/{batches}: validation", total)
                self.say(
                    f"batch {self.batch}/{batches}: measuring the candidate playbook on {total}"
                    " validation tasks"
                )
            self.done += 1
            self._advance(f"  validation {self.done}/{total}: {self._verdict(event)}")
        elif kind == "batch" or (kind == "task" and self.phase != "tasks"):
            self.batch = int(event.get("batch", self.batch + 1))
            size = self.sizes[self.batch - 1] if self.batch <= batches else 0
            self._phase("tasks", f"batch {self.batch}/{batches}: tasks", size)
            self.say(
                f"batch {self.batch}/{batches}: solving, reflecting on and curating {size} tasks"
            )
        if kind == "task":
            size = self.sizes[self.batch - 1] if self.batch <= batches else 0
            self.done += 1
            lessons = int(event.get("lessons", 0))
            self._advance(
                f"  task {self.done}/{size}: {self._verdict(event)}, {lessons}"
                f" lesson{'s' if lessons != 1 else ''}"
            )

    def _advance(self, line: str) -> None:
        if self.bar is not None:
            self.bars.advance(self.bar)
        if self.plain:
            self.say(line)

    @staticmethod
    def _verdict(event: dict[str, Any]) -> str:
        if event.get("correct"):
            return "right"
        return f"failed ({in_words(event['cause'])})" if event.get("cause") else "wrong"

    def batch_done(self, batch: dict[str, Any]) -> None:
        """The commit node's record of a batch."""
        self.phase = ""
        number = int(batch["batch"]) + 1
        if batch["accepted"]:
            added = int(batch["items_added"])
            said = (
                f"accepted as v{batch['version']}: +{added} lesson{'s' if added != 1 else ''}"
                f" ({batch['items_total']} in all)"
            )
        elif not batch.get("operations"):
            said = "nothing to add: no reflection gave a lesson that passed the checks"
        else:
            said = f"not accepted: {batch['reason']}"
        self.say(f"batch {number}/{len(self.sizes)}: {said}")


def summary(result: dict[str, Any], *, max_tokens: int, embedded: bool) -> str:
    """One sentence: what the learn run learned, or why nothing and what to change."""
    name = result.get("playbook")
    before, after = result.get("val_accuracy_before"), result.get("val_accuracy_after")
    batches = result.get("batches") or []
    tasks = sum(int(b.get("reflections", 0)) for b in batches)
    failures: dict[str, int] = result.get("failures") or {}
    failed = sum(failures.values())
    seconds = result.get("seconds")
    measured = (
        f"validation accuracy {_acc(before)} -> {_acc(after)}"
        if before is not None
        else "no validation tasks"
    )
    if result.get("accepted"):
        added = sum(int(b.get("items_added", 0)) for b in batches if b.get("accepted"))
        return (
            f"Learned {added} lesson{'s' if added != 1 else ''} in {seconds} s: playbook {name}"
            f" v{result.get('from_version')} -> v{result.get('to_version')}, {measured}; see them"
            f" with `parallax playbook show --playbook {name}`."
        )
    why = _why_nothing(batches, tasks)
    fixes = []
    if failures.get("length"):
        fixes.append(
            f"{failures['length']} of {tasks} replies stopped at the {max_tokens}-token limit:"
            f" raise PARALLAX_MAX_TOKENS (e.g. PARALLAX_MAX_TOKENS={max_tokens * 2})"
        )
    others = {cause: n for cause, n in failures.items() if cause != "length"}
    if others:
        fixes.append(
            f"{sum(others.values())} of {tasks} tasks failed ("
            + ", ".join(f"{n} {in_words(c)}" for c, n in Counter(others).most_common())
            + ")"
        )
    if embedded:
        fixes.append(
            "the embedded SmolLM2-135M rarely writes a lesson that helps: point learn at a real"
            " model with --base-url URL --model NAME"
        )
    elif not failed:
        fixes.append(
            "more validation tasks (--val-size) let the gate see a gain; --approve lets you decide"
        )
    return f"Nothing learned in {seconds} s: {why} ({measured}); " + "; ".join(fixes) + "."


def _acc(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "n/a"


def _why_nothing(batches: list[dict[str, Any]], tasks: int) -> str:
    if not batches:
        return "there was nothing to learn from"
    if not any(b.get("operations") for b in batches):
        return f"none of the {tasks} reflections gave a lesson that passed the checks"
    reason = next(str(b.get("reason") or "") for b in reversed(batches) if b.get("operations"))
    return (
        f"the gate kept the old playbook ({reason})" if reason else "the gate kept the old playbook"
    )
