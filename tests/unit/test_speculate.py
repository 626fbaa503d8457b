"""Speculate mode end to end against the scripted OpenAI-compatible server: K candidates, each with
its own approach, checked in their own folders (the first that passes wins, the rest are cancelled)
or compared by a judge both ways round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.logic.routing import InvalidInput, choose_route, validate
from parallax.logic.speculation import match_result, pick_checked, tournament_pick
from parallax.runtime.run_context import resolved
from parallax.runtime.worktrees import git, head_commit
from testkit.fault_server import FaultConfig, chat_log

runner = CliRunner()
CHECK = r"""
import os, sys, time
text = open(os.environ["PARALLAX_CANDIDATE_FILE"]).read()
if "SLOW" in text:
    open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
    time.sleep(60)
if "PASS" in text and "WAIT" in sys.argv[2:]:  # pass only once both slow checks are under way
    deadline = time.time() + 20
    while len(os.listdir(sys.argv[1])) < 2 and time.time() < deadline:
        time.sleep(0.05)
if "HALF" in text:
    print("1 failed, 2 passed"); sys.exit(1)
if "PASS" in text and os.path.exists("greeting.txt") == ("REPO" in sys.argv[2:]):
    print("3 passed"); sys.exit(0)
print("1 passed, 2 failed"); sys.exit(1)
"""


def candidate_reply(answers: dict[float, object], judge=None):
    """The scripted model: a candidate's reply by its temperature (0.2, 0.6, 1.0 for three); the
    judge's by `judge`."""

    def reply(body: dict) -> str:
        text = json.dumps(body["messages"])
        if "Answer A:" in text:
            return json.dumps({"reason": "r", "better": judge(text) if judge else "A"})
        answer = answers[round(body["temperature"], 3)]
        files = []
        if isinstance(answer, tuple):
            answer, files = answer
        return json.dumps({"reasoning": "my approach", "answer": answer, "files": files})

    return reply


def check_script(tmp_path: Path) -> tuple[str, Path]:
    script, pids = tmp_path / "check.py", tmp_path / "pids"
    script.write_text(CHECK)
    pids.mkdir()
    return f"{sys.executable} {script} {pids}", pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    done = subprocess.run(
        ["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True
    ).stdout.strip()
    return bool(done) and not done.startswith("Z")


def test_the_first_passing_candidate_wins_and_the_rest_are_cancelled(
    scripted_endpoint, tmp_path, monkeypatch
):
    # the slow checks leave their process ids where this test looks for them: outside any sandbox
    monkeypatch.setenv("PARALLAX_CHECK_SANDBOX", "off")
    url = scripted_endpoint(
        FaultConfig(reply=candidate_reply({0.2: "SLOW one", 0.6: "PASS two", 1.0: "SLOW three"}))
    )
    command, pids = check_script(tmp_path)
    started = time.monotonic()
    result = runner.invoke(
        app,
        [
            "run",
            "Write a function that adds two numbers.",
            "--mode",
            "speculate",
            "--candidates",
            "3",
            "--check",
            f"{command} WAIT",
            "--check-file",
            "solution.py",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 30  # the slow checks were not waited for
    out = json.loads(result.stdout)
    assert (out["mode"], out["status"], out["answer"]) == ("speculate", "ok", "PASS two")
    candidates = sorted(
        (b for b in out["branches"] if b["kind"] == "candidate"), key=lambda b: b["temperature"]
    )
    assert [b["speculation"]["approach"] for b in candidates] == [
        "straightforward",
        "careful",
        "alternative",
    ]
    assert [b["status"] for b in candidates] == ["cancelled", "ok", "cancelled"]
    winner = candidates[1]["id"]
    assert [b["speculation"]["result"] for b in candidates] == ["cancelled", "won", "cancelled"]
    assert all(
        b["speculation"]["why"] == f"cancelled: {winner} passed its check first"
        for b in candidates[::2]
    )
    assert candidates[1]["speculation"]["check"]["passed_tests"] == 3
    assert (
        out["failed_branches"] == [] and out["confidence"] == 0.9
    )  # cancelled ones are not counted as failures
    assert out["verification"]["speculation"]["winner"] == winner
    assert len(chat_log(url)) == 3  # three candidates, no judge
    slow = [int(p.name) for p in pids.iterdir()]
    assert len(slow) == 2 and not any(
        alive(pid) for pid in slow
    )  # the cancelled checks were killed mid-sleep
    home = Path(os.environ["PARALLAX_HOME"])
    assert not any((home / "candidates").glob("*/*"))  # every candidate's folder removed

    shown = runner.invoke(app, ["trace", out["trace_id"]], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert (
        "candidates (picked by check; checks: unconfined (PARALLAX_CHECK_SANDBOX=off))"
        in shown.stdout
    )
    assert "passed its check first" in shown.stdout
    assert "careful at 0.6, check passed: won" in shown.stdout


def make_repo(root: Path) -> Path:
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / "greeting.txt").write_text("hello\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def test_a_candidate_that_writes_outside_its_worktree_is_refused(scripted_endpoint, tmp_path):
    repo = make_repo(tmp_path / "repo")
    base = head_commit(repo)
    scripted_endpoint(
        FaultConfig(
            reply=candidate_reply(
                {
                    0.2: ("PASS escape", [{"path": "../escape.py", "content": "x"}]),
                    1.0: ("PASS in its worktree", [{"path": "notes/extra.txt", "content": "fine"}]),
                }
            )
        )
    )
    command, _ = check_script(tmp_path)
    # --no-early-stop: the passing candidate must not cancel the escaping one before its edit is
    # refused
    result = runner.invoke(
        app,
        [
            "run",
            "Fix the greeting.",
            "--mode",
            "speculate",
            "--candidates",
            "2",
            "--no-early-stop",
            "--check",
            f"{command} REPO",
            "--repo",
            str(repo),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (
        out["status"] == "ok" and out["answer"] == "PASS in its worktree"
    )  # it saw the repository's files
    refused = next(
        b for b in out["branches"] if b["kind"] == "candidate" and b["temperature"] == 0.2
    )
    assert (
        "outside the worktree" in refused["speculation"]["refused"]
        and refused["speculation"]["check"] is None
    )
    assert refused["speculation"]["result"] == "lost" and "refused" in refused["speculation"]["why"]
    assert not (tmp_path / "escape.py").exists() and not (repo.parent / "escape.py").exists()
    # the user's checkout is as it was, and no candidate worktree or branch is left behind
    assert git(repo, "status", "--porcelain").stdout == "" and head_commit(repo) == base
    assert git(repo, "worktree", "list").stdout.count("\n") == 1
    assert git(repo, "branch", "--list", "parallax/*").stdout == ""


def test_with_no_candidate_passing_the_one_with_most_passing_tests_needs_review(
    scripted_endpoint, tmp_path
):
    scripted_endpoint(
        FaultConfig(reply=candidate_reply({0.2: "fails", 0.6: "HALF right", 1.0: "fails too"}))
    )
    command, _ = check_script(tmp_path)
    result = runner.invoke(
        app, ["run", "Write a function.", "--check", command, "--json"]
    )  # a check: speculate
    out = json.loads(result.stdout)
    assert (out["mode"], out["status"], out["answer"]) == (
        "speculate",
        "needs_review",
        "HALF right",
    )
    assert (
        "no candidate passed the check" in out["reason"]
        and "most passing tests (2)" in out["reason"]
    )
    lost = [c for c in out["verification"]["speculation"]["candidates"] if c["result"] == "lost"]
    assert len(lost) == 2 and all("fewer passing tests" in c["why"] for c in lost)


def test_the_python_api_speculates_with_a_check(scripted_endpoint, tmp_path):
    import parallax

    scripted_endpoint(FaultConfig(reply=candidate_reply({0.2: "fails", 1.0: "PASS it"})))
    command, _ = check_script(tmp_path)
    result = parallax.solve(
        "Write a function.", mode="speculate", candidates=2, check=command, check_file="f.py"
    )
    assert (result.status, result.mode, result.answer) == ("ok", "speculate", "PASS it")
    assert result.verification["speculation"]["by"] == "check"
    assert {b.speculation["approach"] for b in result.branches if b.kind == "candidate"} == {
        "straightforward",
        "careful",
    }


async def test_a_judge_that_always_picks_position_a_gives_needs_review(scripted_endpoint):
    from parallax.graphs.solve import graph

    url = scripted_endpoint(
        FaultConfig(
            reply=candidate_reply(
                {0.2: "draft one", 0.6: "draft two", 1.0: "draft three"}, judge=lambda text: "A"
            )
        )
    )
    out = await graph.ainvoke(
        {"task": "Draft a short welcome note.", "mode": "speculate", "candidates": 3}
    )
    assert out["status"] == "needs_review" and "no clear margin" in out["reason"]
    compares = [b for b in out["branches"] if b["kind"] == "compare"]
    assert len(compares) == 4  # two matches, each asked in both orders
    report = out["verification"]["speculation"]
    assert report["by"] == "judge" and not any(m["clear"] for m in report["matches"])
    assert len(chat_log(url)) == 7


async def test_a_judge_that_follows_the_answer_picks_it_in_both_orders(scripted_endpoint):
    from parallax.graphs.solve import graph

    def by_content(text: str) -> str:
        first = text.split("Answer A:")[1].split("Answer B:")[0]
        return "A" if "best" in first else "B"

    scripted_endpoint(
        FaultConfig(
            reply=candidate_reply(
                {0.2: "draft one", 0.6: "draft two", 1.0: "the best draft"}, judge=by_content
            )
        )
    )
    out = await graph.ainvoke(
        {"task": "Draft a short welcome note.", "mode": "speculate", "candidates": 3}
    )
    assert (out["status"], out["answer"]) == ("ok", "the best draft")
    report = out["verification"]["speculation"]
    assert all(
        m["clear"] for m in report["matches"] if report["winner"] in (m["first"], m["second"])
    )
    losers = [c for c in report["candidates"] if c["result"] == "lost"]
    assert len(losers) == 2 and all(c["why"].startswith("lost to ") for c in losers)


def test_tournament_and_check_picks_as_pure_rules():
    assert match_result("a", "b", "B", "A")["winner"] == "b"  # b chosen shown as B and shown as A
    unclear = match_result("a", "b", "A", "A")
    assert not unclear["clear"] and unclear["winner"] == "a"
    assert tournament_pick(["a"], [unclear]).status == "needs_review"
    assert (
        tournament_pick(["only"], []).status == "needs_review"
    )  # a lone candidate is not judged into an ok

    def rec(cid: str, passed: bool, at: float, tests: int) -> dict:
        return {
            "id": cid,
            "status": "ok",
            "speculation": {
                "approach": "x",
                "check": {
                    "passed": passed,
                    "finished_at": at,
                    "passed_tests": tests,
                    "exit": 0 if passed else 1,
                },
            },
        }

    pick = pick_checked(
        [rec("late", True, 2.0, 1), rec("early", True, 1.0, 1), rec("no", False, 0.5, 9)]
    )
    assert (pick.winner, pick.status) == ("early", "ok") and "after early" in pick.why_lost["late"]


@pytest.mark.parametrize(
    "task, route",
    [
        ("Write a function that reverses a string.", "speculate"),
        ("Write a Python function is_prime(n).", "speculate"),
        ("Fix the off-by-one error in: for i in range(1, len(xs)): print(xs[i])", "speculate"),
        ("Draft an email inviting the team to lunch.", "speculate"),
        ("Write a short poem about the sea.", "direct"),
        ("What is 17 * 3?", "vote"),
    ],
)
def test_auto_speculates_on_requests_for_a_function_a_fix_or_a_draft(task, route):
    assert choose_route(task, "", slice_chars=6000) == route


@pytest.mark.parametrize(
    "payload, message",
    [
        ({"mode": "speculate", "candidates": 0}, "candidates must be a whole number from 1 to 10"),
        ({"mode": "vote", "check": "true"}, "a check works with mode speculate"),
        (
            {"mode": "speculate", "check": "true", "check_file": "../x.py"},
            "must be a path inside the candidate's folder",
        ),
        ({"mode": "speculate", "repo": "/tmp"}, "needs a check command"),
    ],
)
def test_bad_speculative_input_is_refused_in_one_line(payload, message):
    with pytest.raises(InvalidInput, match=message):
        validate({"task": "Write a function.", **payload}, resolved())


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--mode", "vote", "--check", "true"],
            "--check and --check-file work with --mode speculate",
        ),
        (
            ["--mode", "speculate", "--candidates", "11"],
            "--candidates must be a whole number from 1 to 10, got 11",
        ),
        (["--mode", "speculate", "--repo", "."], "--repo with --mode speculate needs --check"),
    ],
)
def test_cli_bad_speculative_input_exits_2_and_writes_nothing(args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, ["run", "Write a function.", *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "home").exists()


async def test_the_graph_api_refuses_a_check_command_and_a_repository(scripted_endpoint, tmp_path):
    """On the authenticated graph API the server must run no command and read no path a caller
    names."""
    from parallax.graphs.solve import graph
    from parallax.runtime.run_context import AUTH_TENANT_FIELD

    url = scripted_endpoint(FaultConfig(reply=candidate_reply({0.2: "x", 0.6: "y", 1.0: "z"})))
    config = {"configurable": {"langgraph_auth_user": {AUTH_TENANT_FIELD: "acme"}}}
    marker = tmp_path / "ran"
    for extra in ({"check": f"touch {marker}"}, {"check": "true", "repo": str(tmp_path)}):
        with pytest.raises(InvalidInput, match="not served over the graph API"):
            await graph.ainvoke({"task": "Write a function.", "mode": "speculate", **extra}, config)
    assert not marker.exists() and chat_log(url) == []
    with pytest.raises(
        InvalidInput, match="give a git repository"
    ):  # off the API, a folder that is no repository
        await graph.ainvoke(
            {
                "task": "Write a function.",
                "mode": "speculate",
                "check": "true",
                "repo": str(tmp_path),
            }
        )
