"""A run as a face's flat options give it (the CLI's flags): the graph it runs and its input.

A refusal is a RunInputError naming the option at fault, each option said by the face's own name
for it (`names`: `--repo` on the command line; the input field's name when a face gives none)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parallax.logic.routing import wants_plan
from parallax.logic.run_input import RunInputError
from parallax.state.vocabulary import BUSINESS_ROUTES, listed

OPTIONS = ("mode", "check", "check_file", "repo", "schema", "candidates", "test_command")
"""The options a refusal here names."""


def _named(names: Mapping[str, str]) -> dict[str, str]:
    return {option: names.get(option, option) for option in OPTIONS}


def speculates(mode: str, check: str | None) -> bool:
    """Whether the run speculates: mode speculate, or auto with a check command (a check can only
    judge candidates)."""
    return mode == "speculate" or (mode == "auto" and check is not None)


def check_options(
    mode: str,
    check: str | None,
    check_file: str | None,
    repo: Path | None,
    names: Mapping[str, str],
) -> None:
    """RunInputError for a mode, check and repository that do not go together, or a repository
    that is no folder."""
    n = _named(names)
    speculative = speculates(mode, check)
    if repo is not None and mode not in ("plan", "auto", "speculate"):
        raise RunInputError(
            f"{n['repo']} needs {n['mode']} plan (edit tasks run in plan mode) or speculate with "
            f"{n['check']}, not {n['mode']} {mode}",
            "repo",
        )
    if repo is not None and speculative and check is None:
        raise RunInputError(
            f"{n['repo']} with {n['mode']} speculate needs {n['check']}: the command run in each "
            "candidate's worktree",
            "repo",
        )
    if (check is not None or check_file is not None) and not speculative:
        raise RunInputError(
            f"{n['check']} and {n['check_file']} work with {n['mode']} speculate, not "
            f"{n['mode']} {mode}",
            "check",
        )
    if repo is not None and not repo.is_dir():
        raise RunInputError(f"{n['repo']} {repo}: no such folder", "repo")


def check_schema_options(mode: str, repo: Path | None, names: Mapping[str, str]) -> None:
    """RunInputError for an answer's schema on a plan run (a repository's included)."""
    if mode == "plan" or repo is not None:
        n = _named(names)
        raise RunInputError(
            f"{n['schema']} works with {n['mode']} {listed(('auto', *BUSINESS_ROUTES))}, not plan "
            f"(nor {n['repo']})",
            "output_schema",
        )


@dataclass(frozen=True)
class RunOptions:
    """A run's options as a face takes them; `mode` is any run mode or "plan"; `repo` a folder of
    this disk."""

    task: str
    question: str = ""
    mode: str = "auto"
    votes: int = 5
    red_team: bool = False
    playbook: str = "default"
    tenant: str = "default"
    pages: list[str] | None = None
    min_votes: int | None = None
    candidates: int | None = None
    check: str | None = None
    check_file: str | None = None
    repo: Path | None = None
    test_command: str = ""
    max_replans: int = 1
    target: str | None = None
    max_cost: float | None = None
    max_tokens: int | None = None
    output_schema: dict[str, Any] | None = None

    @property
    def speculative(self) -> bool:
        return speculates(self.mode, self.check)

    def graph(self) -> str:
        """ "plan" for mode plan, a repository's edit tasks, or an auto request with several
        steps; else "solve"."""
        plan_shaped = (
            self.mode == "auto"
            and not self.speculative
            and self.output_schema is None
            and wants_plan(self.question or self.task)
        )
        return (
            "plan"
            if self.mode == "plan"
            or (self.repo is not None and not self.speculative)
            or plan_shaped
            else "solve"
        )


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _speculation(options: RunOptions) -> dict[str, Any]:
    repo = str(options.repo.resolve()) if options.repo is not None else None
    return {
        "mode": "speculate",
        "candidates": 3 if options.candidates is None else options.candidates,
        **_present({"check": options.check, "check_file": options.check_file, "repo": repo}),
    }


def _plan(options: RunOptions, payload: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """The plan graph's input from `payload`: RunInputError for candidates without a repository
    to test them in."""
    repo = options.repo
    if (
        (options.candidates or 1) > 1
        and not (repo is not None and options.test_command)
        and (options.mode == "plan" or repo is not None)
    ):
        n = _named(names)
        raise RunInputError(
            f"{n['candidates']} in plan mode makes edit tasks speculative: it needs {n['repo']} "
            f"and {n['test_command']}",
            "candidates",
        )
    payload.update(mode="plan", max_replans=options.max_replans, test_command=options.test_command)
    if options.candidates is not None and repo is not None:
        payload["candidates"] = options.candidates
    payload.pop("red_team")
    if repo is not None:
        payload["repo"] = str(repo.resolve())
    return payload


def graph_input(options: RunOptions, names: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """The graph the options run ("solve" or "plan") and its input; RunInputError naming the
    option at fault."""
    o = options
    payload: dict[str, Any] = {
        "task": o.task,
        "question": o.question,
        "mode": o.mode,
        "votes": o.votes,
        "red_team": o.red_team,
        "playbook": o.playbook,
        "tenant": o.tenant,
        **_present({"pages": o.pages}),
    }
    if o.speculative:
        payload.update(_speculation(o))
    payload.update(
        _present(
            {
                "min_votes": o.min_votes,
                "target": o.target,
                "max_cost": o.max_cost,
                "max_tokens": o.max_tokens,
                "output_schema": o.output_schema,
            }
        )
    )
    name = o.graph()
    return name, _plan(o, payload, names) if name == "plan" else payload


def check_repository(repo: str, names: Mapping[str, str]) -> None:
    """RunInputError for a folder that is no git repository with a commit (edit tasks and checks
    need one)."""
    from parallax.runtime.worktrees import GitError, repository_root

    try:
        repository_root(repo)
    except GitError as exc:
        raise RunInputError(
            f"{_named(names)['repo']} {repo}: {exc} "
            "(give a git repository with at least one commit)",
            "repo",
        ) from None
