"""Edit tasks on a throwaway git repository: worktrees, refused paths, serialised writes, merges and
a conflict."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.logic.edit_agent import run_tests
from parallax.runtime.worktrees import (
    Integration,
    PathRefused,
    Worktree,
    check_merge,
    git,
    head_commit,
)
from testkit.scripted_model import scripted

PLANNER = "You plan work as a small graph"
EDITOR = "You change files in a repository through tools"
runner = CliRunner()


def make_repo(root: Path) -> Path:
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / "greeting.txt").write_text("hello\nworld\n")
    (root / "notes.txt").write_text("notes\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def step(action: str, path: str = "", content: str = "", note: str = "") -> str:
    return json.dumps({"action": action, "path": path, "content": content, "note": note})


def test_tools_refuse_paths_outside_the_worktree_and_undeclared_files(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "secret.txt").write_text("s")
    (repo / "link").symlink_to(tmp_path / "secret.txt")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "link")
    tree = Worktree.create(repo, "t/one", head_commit(repo), tmp_path / "wt", ["greeting.txt"])
    for bad in ("../secret.txt", "/etc/passwd", "link", ".git/config", "sub/../../x"):
        with pytest.raises(PathRefused):
            tree.read(bad)
    with pytest.raises(PathRefused, match="not among the files this task declared"):
        tree.write("notes.txt", "changed")
    assert tree.write("greeting.txt", "hi\n").startswith("wrote greeting.txt")
    assert tree.read("greeting.txt") == "hi\n" and "notes.txt" in tree.list()
    assert (
        asyncio.run(run_tests(tree, 'python -c "import time; time.sleep(5)"', 0.2))
        == "test command timed out after 0.2s"
    )
    assert tree.commit("change") is not None and tree.changed_files() == ["greeting.txt"]
    tree.remove()
    assert (
        not (tmp_path / "wt").exists() and (repo / "greeting.txt").read_text() == "hello\nworld\n"
    )


def test_merge_tree_reports_a_conflict_without_touching_any_checkout(tmp_path):
    repo = make_repo(tmp_path / "repo")
    base = head_commit(repo)
    for name, text in (("a", "hello A\nworld\n"), ("b", "hello B\nworld\n")):
        tree = Worktree.create(repo, f"t/{name}", base, tmp_path / name, ["greeting.txt"])
        tree.write("greeting.txt", text)
        tree.commit(name)
        tree.remove()
    integration = Integration(repo, "t/integration", base)
    assert integration.merge("t/a", "merge a").clean
    found = integration.merge("t/b", "merge b")
    assert not found.clean and found.conflicts == ["greeting.txt"] and "CONFLICT" in found.messages
    assert check_merge(repo, "t/integration", "t/a").clean
    assert git(repo, "show", "t/integration:greeting.txt").stdout == "hello A\nworld\n"
    assert git(repo, "status", "--porcelain").stdout == "" and head_commit(repo) == base


def edit_script(order: list):
    """Planner: three edit tasks; 1 and 3 both rewrite greeting.txt (overlapping writes), 2 writes
    notes.txt."""
    plan = {
        "tasks": [
            {
                "id": 1,
                "goal": "GOAL-ONE shout the greeting",
                "kind": "edit",
                "writes": ["greeting.txt"],
            },
            {"id": 2, "goal": "GOAL-TWO add a note", "kind": "edit", "writes": ["notes.txt"]},
            {
                "id": 3,
                "goal": "GOAL-THREE greet in French",
                "kind": "edit",
                "writes": ["greeting.txt"],
            },
        ]
    }
    writes = {
        "GOAL-ONE": ("greeting.txt", "HELLO\nworld\n"),
        "GOAL-TWO": ("notes.txt", "notes\nmore notes\n"),
        "GOAL-THREE": ("greeting.txt", "bonjour\nworld\n"),
    }

    def script(prompt, t, i):
        if prompt.startswith(PLANNER):
            return json.dumps(plan)
        goal = next(g for g in writes if g in prompt)
        order.append((goal, "Result:" in prompt))
        if "../" not in prompt and goal == "GOAL-TWO" and "Result:" not in prompt:
            return step(
                "write", "../escape.txt", "x"
            )  # refused; the agent then writes its own file
        if f"wrote {writes[goal][0]}" in prompt:
            return step("done", note=f"{goal} done")
        return (
            0.05,
            step("write", *writes[goal]),
        )  # a retry writes the whole file from its old view

    return script


def test_edit_plan_two_clean_merges_and_one_reported_conflict(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    base = head_commit(repo)
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    order: list = []
    ctx, _ = scripted(edit_script(order))
    result = runner.invoke(
        app,
        [
            "run",
            "Shout the greeting, then add a note, then greet in French.",
            "--mode",
            "plan",
            "--repo",
            str(repo),
            "--json",
        ],
        obj=ctx,
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    merge = out["verification"]["merge"]
    assert merge["merged"] == [1, 2] and [c["task"] for c in merge["conflicts"]] == [3]
    conflict = merge["conflicts"][0]
    assert conflict["files"] == ["greeting.txt"] and "+bonjour" in conflict["diff"]
    assert "undo" in conflict["retry"]["why"]  # the retry rewrote the file from its old view
    assert out["status"] == "needs_review" and "task 3 conflicts in greeting.txt" in out["reason"]
    integration = merge["integration_branch"]
    assert git(repo, "show", f"{integration}:greeting.txt").stdout == "HELLO\nworld\n"
    assert git(repo, "show", f"{integration}:notes.txt").stdout == "notes\nmore notes\n"
    # nothing written outside worktrees: the checkout, its branch and its files are as they were
    assert git(repo, "status", "--porcelain").stdout == "" and head_commit(repo) == base
    assert (repo / "greeting.txt").read_text() == "hello\nworld\n" and not (
        tmp_path / "escape.txt"
    ).exists()
    assert git(repo, "worktree", "list").stdout.count("\n") == 1  # worktrees removed
    branches = git(repo, "branch", "--list", "parallax/*").stdout
    assert (
        "task-1" in branches and "task-3" in branches and "integration" in branches
    )  # branches kept
    tasks = {t["id"]: t for t in out["tasks"]}
    assert any("../escape.txt" in r for r in tasks[2]["edit"]["refused"])
    # 1 and 3 declared the same file: they never ran at the same time
    one = (tasks[1]["started_at"], tasks[1]["started_at"] + tasks[1]["seconds"])
    three = (tasks[3]["started_at"], tasks[3]["started_at"] + tasks[3]["seconds"])
    assert one[1] <= three[0] + 0.01 or three[1] <= one[0] + 0.01


def test_cli_plan_json_resume_and_plan_show(tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    plan = {
        "tasks": [
            {"id": 1, "goal": "ONE name a city"},
            {"id": 2, "goal": "TWO describe $1", "deps": [1]},
        ]
    }

    def script(prompt, t, i):
        if prompt.startswith(PLANNER):
            return json.dumps(plan)
        return json.dumps(
            {"reasoning": "r", "answer": "Lyon" if "ONE" in prompt else "A city on the Rhone"}
        )

    ctx, _ = scripted(script)
    result = runner.invoke(
        app, ["run", "Name a city, then describe it.", "--thread", "t-plan", "--json"], obj=ctx
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (
        out["mode"] == "plan" and out["status"] == "ok" and out["answer"] == "A city on the Rhone"
    )
    for key in ("plan", "tasks", "board", "verification"):
        assert key in out
    assert [(t["id"], t["deps"], t["status"], t["output"]) for t in out["tasks"]] == [
        (1, [], "DONE", "Lyon"),
        (2, [1], "DONE", "A city on the Rhone"),
    ]
    assert all(b["kind"] in ("direct", "safety") for t in out["tasks"] for b in t["branches"])
    assert {"schema", "facts", "semantics", "rules"} <= set(out["verification"])
    again = runner.invoke(
        app, ["resume", "t-plan", "--json"], obj=ctx
    )  # a finished plan thread is reported
    assert again.exit_code == 0 and json.loads(again.stdout)["tasks"] == out["tasks"]
    shown = runner.invoke(app, ["plan", "show", out["trace_id"]])
    assert shown.exit_code == 0
    assert (
        't1["1 · solve · DONE<br/>ONE name a city"]' in shown.stdout and "t1 --> t2" in shown.stdout
    )
    picture = tmp_path / "plan.png"
    drawn = runner.invoke(app, ["plan", "show", out["trace_id"], "--output", str(picture)])
    assert drawn.exit_code == 0 and picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trace = runner.invoke(app, ["trace", out["trace_id"], "--json"])
    assert {b.get("task") for b in json.loads(trace.stdout)["branches"]} >= {1, 2}


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "x", "--mode", "plan", "--repo", "/no/such/folder"], "no such folder"),
        (["run", "x", "--mode", "vote", "--repo", "."], "--repo needs --mode plan"),
        (
            ["run", "x", "--mode", "plan", "--max-replans", "9"],
            "--max-replans must be a whole number from 0 to 5, got 9",
        ),
        (["plan", "show", "abc", "--output", "x.svg"], "give a .png file name"),
    ],
)
def test_cli_plan_bad_input_is_one_line_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    ctx, calls = scripted(lambda p, t, i: "{}")
    result = runner.invoke(app, args, obj=ctx)
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and calls == []
    assert not (tmp_path / "home").exists()


def test_cli_refuses_a_folder_that_is_not_a_repository(tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    (tmp_path / "plain").mkdir()
    ctx, calls = scripted(lambda p, t, i: "{}")
    result = runner.invoke(
        app, ["run", "x", "--mode", "plan", "--repo", str(tmp_path / "plain")], obj=ctx
    )
    assert result.exit_code == 2 and "give a git repository" in result.output and calls == []


def test_a_speculative_edit_task_merges_the_first_passing_patch_and_removes_the_rest(
    tmp_path, monkeypatch
):
    repo = make_repo(tmp_path / "repo")
    (repo / "check.py").write_text(
        "import sys\nsys.exit(0 if open('greeting.txt').read() == 'HELLO\\n' else 1)\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "check")
    base = head_commit(repo)
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    plan = {
        "tasks": [
            {
                "id": 1,
                "goal": "GOAL-ONE shout the greeting",
                "kind": "edit",
                "writes": ["greeting.txt"],
            }
        ]
    }
    contents = {0.2: "hello?\n", 0.6: "HELLO\n", 1.0: "HELLO\n"}

    def script(prompt, t, i):
        if prompt.startswith(PLANNER):
            return json.dumps(plan)
        if "wrote greeting.txt" in prompt:
            return step("done", note="shouted")
        reply = step("write", "greeting.txt", contents[round(t, 3)])
        return (
            (30.0, reply) if round(t, 3) == 1.0 else reply
        )  # the third is slow: cancelled once another passes

    ctx, calls = scripted(script)
    result = runner.invoke(
        app,
        [
            "run",
            "Shout the greeting.",
            "--mode",
            "plan",
            "--repo",
            str(repo),
            "--candidates",
            "3",
            "--test-command",
            f"{sys.executable} check.py",
            "--json",
        ],
        obj=ctx,
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    task = out["tasks"][0]
    assert task["status"] == "DONE", task["reason"]
    candidates = {round(c["temperature"], 3): c for c in task["edit"]["candidates"]}
    assert [candidates[t]["result"] for t in (0.6, 1.0)] == ["won", "cancelled"]
    # the wrong patch lost on its tests, or was cancelled before they ended (the right one passed
    # first)
    assert candidates[0.2]["result"] in ("lost", "cancelled")
    if candidates[0.2]["result"] == "lost":
        assert (
            candidates[0.2]["check"]["passed"] is False
            and "its tests failed" in candidates[0.2]["why"]
        )
    assert candidates[1.0]["why"] == f"cancelled: {candidates[0.6]['id']} passed its check first"
    assert task["edit"]["branch"] == candidates[0.6]["branch"]
    merge = out["verification"]["merge"]
    assert merge["merged"] == [1] and out["status"] == "ok"
    assert git(repo, "show", f"{merge['integration_branch']}:greeting.txt").stdout == "HELLO\n"
    # losers are not merged and leave nothing: no worktree, no branch; the checkout is untouched
    branches = git(repo, "branch", "--list", "parallax/*").stdout.split()
    assert candidates[0.2]["branch"] not in branches and candidates[1.0]["branch"] not in branches
    assert candidates[0.6]["branch"] in branches
    assert git(repo, "worktree", "list").stdout.count("\n") == 1 and head_commit(repo) == base
    assert git(repo, "status", "--porcelain").stdout == ""
