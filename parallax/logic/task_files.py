"""Learning and evaluation tasks loaded from JSONL.

Lines hold `context`|`question`|`input`, `target`|`answer` and an optional `scorer`; ACE's Formula
tasks and GSM8K (working before `####`) load unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from parallax.state.records import TaskData

INPUT_KEYS = ("context", "question", "input")
TARGET_KEYS = ("target", "answer")
SCORER_NAMES = ("auto", "numeric", "exact", "contains")


class TaskFileError(ValueError):
    """A task file cannot be used as it is; the message names the file and line."""


def parse_task(obj: object) -> TaskData:
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    text = next(
        (obj[k] for k in INPUT_KEYS if isinstance(obj.get(k), str) and obj[k].strip()), None
    )
    if text is None:
        raise ValueError(f"no task text: expected one of {', '.join(INPUT_KEYS)}")
    target = next((obj[k] for k in TARGET_KEYS if k in obj and obj[k] is not None), None)
    if target is not None:
        target = str(target).split("####")[-1].strip()
    scorer = obj.get("scorer", "auto")
    if scorer not in SCORER_NAMES:
        raise ValueError(f"unknown scorer {scorer!r}: use one of {', '.join(SCORER_NAMES)}")
    return {"input": text, "target": target, "scorer": scorer}


def load_tasks(path: Path, *, skip_bad: bool = False) -> tuple[list[TaskData], list[str]]:
    """(tasks, problems). Without `skip_bad` the first problem raises TaskFileError."""
    if not path.is_file():
        raise TaskFileError(f"task file not found: {path}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise TaskFileError(f"{path} is not UTF-8 text (byte {exc.start})") from exc
    tasks, problems = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            task = parse_task(json.loads(line))
        except (json.JSONDecodeError, ValueError) as exc:
            problem = f"{path}:{number}: {exc}"
            if not skip_bad:
                raise TaskFileError(
                    f"{problem} (fix the line, or pass --skip-bad to leave it out)"
                ) from exc
            problems.append(problem)
            continue
        task["id"] = f"{path.stem}:{number}"
        tasks.append(task)
    if not tasks:
        raise TaskFileError(f"{path} has no usable tasks")
    return tasks, problems
