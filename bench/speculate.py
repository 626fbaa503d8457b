"""Speculate benchmark: does trying K approaches at once solve more, and what does early
cancellation save?

Each task is a throwaway git repository with a real pytest suite (`test_solution.py`, three unittest
tests of a small function `f`) and no `solution.py`. The real solve graph runs it in speculate mode
with `--check "python -m unittest -q test_solution"` and `check_file` solution.py, so every
candidate is written into its own git worktree and the suite runs there. The model is
`testkit.fault_server` over HTTP with a scripted reply: a candidate is correct with the stated
probability `--p-correct` (else one of two wrong versions that pass 2 or 0 of the 3 tests), drawn
once per (task, candidate temperature), so early cancellation and waiting for all see the same
candidates. Every reply waits `--latency-ms`, and a `--slow-rate` share of replies `--slow-ms` more
(a slow tail); the fan-out may have `--concurrency` model calls in flight, so with K above it
candidates queue for a slot.

Measured per configuration (K = 1, 3, 5; K > 1 both with early cancellation and waiting for all,
which is the product's `--no-early-stop`):

  solved_share        tasks whose picked candidate passed the suite (expected 1 - (1 - p)^K; the
  draws'
                      own pass rate is `observed_p_correct`, from K = 5 waiting for all, which
                      checks every one)
  needs_review        tasks where none passed (the most passing tests picked) model_calls
  chat requests the server received (cancelled ones that were under way included)
  model_calls_completed  of those, the ones answered (a cancelled call is cut off: its tokens are
  not all spent) checks_run          candidates whose suite ran to its end wall_s              total
  wall time of the runs (one after the other) worktrees_left      git worktrees, candidate branches
  and candidate folders left behind (goal 0; per
                      configuration, and at the top level after all of them)

Prints one JSON object on stdout (progress on stderr):

    python -m bench.speculate [--tasks 10] [--p-correct 0.4] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from parallax.runtime.settings import reload_settings
from testkit.fault_server import FaultConfig, FaultServer, chat_log

ENDPOINT_VARIABLES = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "PARALLAX_RESPONSE_FORMAT",
    "PARALLAX_HOME",
)
TESTS = """import unittest

from solution import f


class TestF(unittest.TestCase):
    def test_zero(self):
        self.assertEqual(f(0), 1)

    def test_one(self):
        self.assertEqual(f(1), {a} + 1)

    def test_two(self):
        self.assertEqual(f(2), 2 * {a} + 1)
"""
RIGHT = "def f(x):\n    return x * {a} + 1\n"
WRONG = (
    "def f(x):\n    return x * {a} + 1 if x < 2 else 0\n",  # passes 2 of 3
    "def f(x):\n    return x * {a}\n",
)  # passes none
CHECK = f"{sys.executable} -m unittest -q test_solution"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_repo(root: Path, a: int) -> Path:
    root.mkdir(parents=True)
    (root / "test_solution.py").write_text(TESTS.format(a=a))
    (root / "README.md").write_text(f"f(x) = {a}x + 1\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        [
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@localhost",
            "commit",
            "-q",
            "-m",
            "tests",
        ],
    ):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


def uniform(key: str) -> float:
    """A reproducible draw in [0, 1) from `key` (sha256), one per (task, candidate)."""
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) / 2**256


def task_of(body: dict[str, Any]) -> int:
    return int(json.dumps(body.get("messages", [])).split("TASK-")[1].split()[0].strip('.\\"'))


def scripted_delay(slow_rate: float, slow_ms: float, seed: int):
    """A candidate's reply is slow (by `slow_ms`) with probability `slow_rate`, drawn once per
    (task, temperature), so early cancellation and waiting for all see the same slow candidates."""

    def delay(body: dict[str, Any]) -> float:
        t = round(float(body.get("temperature") or 0.0), 3)
        return slow_ms / 1000 if uniform(f"{seed}:slow:{task_of(body)}:{t}") < slow_rate else 0.0

    return delay


def scripted_reply(p_correct: float, seed: int):
    """The scripted model: a candidate for task `a` at temperature t is right with probability
    p_correct."""

    def reply(body: dict[str, Any]) -> str:
        a, t = task_of(body), round(float(body.get("temperature") or 0.0), 3)
        draw = uniform(f"{seed}:{a}:{t}")
        code = RIGHT if draw < p_correct else WRONG[int(draw * 1000) % 2]
        return json.dumps({"reasoning": "scripted", "answer": code.format(a=a), "files": []})

    return reply


def leftovers(repos: list[Path], home: Path) -> int:
    """Worktrees (beyond each repository's own), candidate branches and candidate folders still
    there."""
    left = 0
    for repo in repos:
        listed = subprocess.run(
            ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True
        ).stdout
        left += len(listed.splitlines()) - 1
        branches = subprocess.run(
            ["git", "-C", str(repo), "branch", "--list", "parallax/*"],
            capture_output=True,
            text=True,
        ).stdout
        left += len(branches.splitlines())
    return left + sum(1 for _ in (home / "candidates").glob("*/*"))


async def run_config(
    server: FaultServer,
    url: str,
    repos: list[Path],
    k: int,
    early: bool,
    concurrency: int,
    home: Path,
) -> dict[str, Any]:
    from langgraph.store.memory import InMemoryStore

    from parallax.graphs.solve import builder
    from parallax.state.context import Context

    graph = builder.compile(store=InMemoryStore())
    ctx = Context(early_stop=early, max_concurrency=concurrency, straggler_factor=0.0)
    before = {e["id"] for e in chat_log(url)}
    left_before = leftovers(repos, home)
    solved = review = checks = passing = 0
    started = time.perf_counter()
    for repo in repos:
        a = int(repo.name.split("-")[1])
        out = await graph.ainvoke(
            {
                "task": f"Write the function f in solution.py for TASK-{a} (see the tests).",
                "mode": "speculate",
                "candidates": k,
                "check": CHECK,
                "check_file": "solution.py",
                "repo": str(repo),
            },
            context=ctx,
        )
        report = out["verification"]["speculation"]
        winner = next(c for c in report["candidates"] if c["id"] == report["winner"])
        solved += bool((winner.get("check") or {}).get("passed"))
        review += out["status"] == "needs_review"
        checks += sum(1 for c in report["candidates"] if c.get("check"))
        passing += sum(1 for c in report["candidates"] if (c.get("check") or {}).get("passed"))
    wall = time.perf_counter() - started
    await asyncio.sleep(
        0.2
    )  # a cancelled request's log entry closes when the server sees the client leave
    calls = [e for e in chat_log(url) if e["id"] not in before]
    return {
        "k": k,
        "early_cancellation": early,
        "tasks": len(repos),
        "solved_share": round(solved / len(repos), 3),
        "needs_review": review,
        "model_calls": len(calls),
        "model_calls_completed": sum(e["status"] == 200 for e in calls),
        "model_calls_counted_as": "requests (each candidate asks alone)",
        "checks_run": checks,
        "checks_passed": passing,
        "wall_s": round(wall, 2),
        "worktrees_left": leftovers(repos, home) - left_before,
    }


async def measure(
    tasks: int,
    p_correct: float,
    seed: int,
    latency_ms: float,
    slow_rate: float,
    slow_ms: float,
    concurrency: int,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-speculate-") as scratch:
        root = Path(scratch)
        home = root / "home"
        repos = [make_repo(root / f"task-{a}", a) for a in range(2, 2 + tasks)]
        server = FaultServer(
            FaultConfig(
                reply=scripted_reply(p_correct, seed),
                latency_ms=latency_ms,
                delay=scripted_delay(slow_rate, slow_ms, seed),
                seed=seed,
            )
        )
        saved = {k: os.environ.get(k) for k in ENDPOINT_VARIABLES}
        try:
            with server as url:
                os.environ.update(
                    OPENAI_BASE_URL=url,
                    OPENAI_API_KEY="bench",
                    PARALLAX_RESPONSE_FORMAT="json_schema",
                    PARALLAX_HOME=str(home),
                )
                reload_settings()
                from parallax.runtime.chat_models import forget_clients

                forget_clients()
                results = []
                for k, early in ((1, True), (3, True), (3, False), (5, True), (5, False)):
                    log(
                        f"K={k} {'early cancellation' if early else 'waiting for all'}: {tasks}"
                        " tasks"
                    )
                    results.append(
                        await run_config(server, url, repos, k, early, concurrency, home)
                    )
                    log(f"  {results[-1]}")
                final_left = leftovers(repos, home)
        finally:
            for key, value in saved.items():
                os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
            reload_settings()
    by = {(r["k"], r["early_cancellation"]): r for r in results}
    savings = {
        f"k{k}": {
            "model_calls_early_vs_all": round(
                by[(k, True)]["model_calls"] / by[(k, False)]["model_calls"], 3
            ),
            "completed_calls_early_vs_all": round(
                by[(k, True)]["model_calls_completed"] / by[(k, False)]["model_calls_completed"], 3
            ),
            "wall_early_vs_all": round(by[(k, True)]["wall_s"] / by[(k, False)]["wall_s"], 3),
            "checks_early_vs_all": round(
                by[(k, True)]["checks_run"] / by[(k, False)]["checks_run"], 3
            ),
        }
        for k in (3, 5)
    }
    left = final_left
    return {
        "setup": {
            "tasks": tasks,
            "p_correct": p_correct,
            "seed": seed,
            "latency_ms": latency_ms,
            "slow_rate": slow_rate,
            "slow_ms": slow_ms,
            "concurrency": concurrency,
            "check": "python -m unittest -q test_solution (3 tests per task)",
        },
        "solved_share": {f"k{k}": by[(k, True)]["solved_share"] for k in (1, 3, 5)},
        "expected_solved_share": {f"k{k}": round(1 - (1 - p_correct) ** k, 3) for k in (1, 3, 5)},
        "observed_p_correct": round(
            by[(5, False)]["checks_passed"] / max(1, by[(5, False)]["checks_run"]), 3
        ),
        "early_vs_all": savings,
        "worktrees_left": left,
        "goals_met": {
            "worktrees_left_0": left == 0,
            "k3_solves_more_than_k1": by[(3, True)]["solved_share"] > by[(1, True)]["solved_share"],
            "early_cancellation_saves_calls": all(
                s["completed_calls_early_vs_all"] < 1 for s in savings.values()
            ),
        },
        "runs": results,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        prog="python -m bench.speculate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--tasks", type=int, default=10, help="throwaway repositories, one task each"
    )
    parser.add_argument(
        "--p-correct", type=float, default=0.4, help="chance that one candidate passes the suite"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--latency-ms", type=float, default=1000.0, help="every model reply waits this long"
    )
    parser.add_argument(
        "--slow-rate", type=float, default=0.3, help="share of replies that wait --slow-ms more"
    )
    parser.add_argument("--slow-ms", type=float, default=2000.0)
    parser.add_argument("--concurrency", type=int, default=2, help="model calls in flight per run")
    parser.add_argument(
        "--json", action="store_true", help="(the output is always one JSON object)"
    )
    args = parser.parse_args(argv)
    result = asyncio.run(
        measure(
            args.tasks,
            args.p_correct,
            args.seed,
            args.latency_ms,
            args.slow_rate,
            args.slow_ms,
            args.concurrency,
        )
    )
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
