"""Code the model wrote runs confined (runtime/sandbox.py): no secrets in its environment, limits on
what it takes, everything it starts killed with it, and in bubblewrap (no network, nothing writable
but its folder) when present.

CI installs bubblewrap (.ci/run), so the tests that need it run there; a skip fails CI like any
other.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.runtime.sandbox import BUBBLEWRAP, run_command
from testkit.fault_server import FaultConfig

runner = CliRunner()
VALUE = "qzx-secret-value"
SECRETS = {
    "OPENAI_API_KEY": f"sk-{VALUE}",
    "DATABASE_URL": f"postgresql://u:{VALUE}@db/x",
    "PARALLAX_API_KEYS": f"{VALUE}:acme",
    "REDIS_URL": f"redis://:{VALUE}@r/0",
    "AWS_SECRET_ACCESS_KEY": VALUE,
}
WHERE = [
    "off",
    pytest.param(
        "auto",
        marks=pytest.mark.skipif(
            not shutil.which("bwrap"),
            reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap",
        ),
    ),
]
bwrap_only = pytest.mark.skipif(
    not shutil.which("bwrap"),
    reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap",
)


@pytest.fixture(params=WHERE)
def sandbox(request, monkeypatch) -> str:
    """Each test runs unconfined (PARALLAX_CHECK_SANDBOX=off) and in bubblewrap: what is said of
    both holds in both."""
    monkeypatch.setenv("PARALLAX_CHECK_SANDBOX", request.param)
    return request.param


@pytest.fixture
def folder(tmp_path) -> Path:
    where = tmp_path / "work"
    where.mkdir()
    return where


def run(command: str, folder: Path, timeout_s: float = 20, **kwargs):
    return asyncio.run(run_command(command, folder, timeout_s, **kwargs))


def survivors(mark: str, program: str = "") -> list[int]:
    """Processes whose command line holds `mark` (a sleep of a length no other process uses); with
    `program`, only those running it."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark.encode() in argv and (not program or Path(argv[0].decode()).name == program):
            found.append(int(pid))
    return found


def sleep_mark() -> str:
    return f"300.{uuid.uuid4().int % 10**6:06d}"


def test_a_command_sees_no_secret_of_parallax(sandbox, folder, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PARALLAX_MODEL", f"gpt-{VALUE}")
    ran = run("env", folder, env={"PARALLAX_CANDIDATE_FILE": str(folder / "a.py")})
    assert ran.exit == 0, ran.output
    names = {line.split("=", 1)[0] for line in ran.output.splitlines() if "=" in line}
    assert "PATH" in names and "PARALLAX_CANDIDATE_FILE" in names
    assert not names & {*SECRETS, "PARALLAX_MODEL"} and VALUE not in ran.output
    assert ran.sandbox == (
        BUBBLEWRAP if sandbox == "auto" else "unconfined (PARALLAX_CHECK_SANDBOX=off)"
    )


def test_a_memory_hog_and_a_huge_file_are_stopped_by_the_limits(sandbox, folder, monkeypatch):
    monkeypatch.setenv("PARALLAX_CHECK_MEMORY_MB", "256")
    monkeypatch.setenv("PARALLAX_CHECK_FILE_MB", "1")
    hog = run(f'{sys.executable} -c "x = bytearray(1024 ** 3); print(len(x))"', folder)
    assert hog.exit == 1 and "MemoryError" in hog.output and not hog.passed
    big = run(f"{sys.executable} -c \"open('big', 'wb').write(bytes(5 * 2 ** 20))\"", folder)
    assert big.exit != 0 and (folder / "big").stat().st_size == 2**20


@pytest.mark.parametrize("how", ["timeout", "cancelled", "ended"])
def test_everything_a_command_starts_dies_with_it(sandbox, folder, how):
    """On timeout, on cancellation (another candidate passed first) and when it ends: no descendant
    lives on, not one in the background nor one in a session of its own (that one only dies in
    bubblewrap, or while its parent lives: below)."""
    mark, other = sleep_mark(), sleep_mark()
    if how == "ended":
        ran = run(f"sh -c 'sleep {mark} & sleep {other} & echo started'", folder)
        assert ran.passed and ran.output == "started\n" and ran.seconds < 5
    elif how == "timeout":
        ran = run(f"sh -c 'sleep {mark} & sleep {other}'", folder, timeout_s=1)
        assert ran.timed_out and not ran.passed and ran.seconds < 5
    else:

        async def cancel() -> None:
            task = asyncio.ensure_future(
                run_command(f"sh -c 'sleep {mark} & setsid sleep {other}'", folder, 60)
            )
            deadline = asyncio.get_running_loop().time() + 10
            while not (survivors(mark, "sleep") and survivors(other, "sleep")):
                assert asyncio.get_running_loop().time() < deadline, "the sleeps did not start"
                await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancel())
    assert survivors(mark) == [] and survivors(other) == []


def test_an_edit_tasks_test_command_leaves_no_grandchild_behind(sandbox, tmp_path):
    """The edit agent's test tool ran `subprocess.run` with a timeout, which kills the shell and
    leaves what it started running for ever."""
    from parallax.logic.edit_agent import run_tests
    from parallax.runtime.worktrees import Worktree, git, head_commit

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    tree = Worktree.create(repo, "t/one", head_commit(repo), tmp_path / "wt", ["a.txt"])
    mark, other = sleep_mark(), sleep_mark()
    try:
        said = asyncio.run(run_tests(tree, f"sh -c 'sleep {mark} & sleep {other}'", 1))
        assert said == "test command timed out after 1s"
        assert survivors(mark) == [] and survivors(other) == []
        where = BUBBLEWRAP if sandbox == "auto" else "unconfined (PARALLAX_CHECK_SANDBOX=off)"
        assert asyncio.run(run_tests(tree, "cat a.txt", 10)) == f"exit 0 (sandbox: {where})\na\n"
    finally:
        tree.remove()


@bwrap_only
def test_in_bubblewrap_only_the_folder_is_writable_and_the_network_is_unreachable(
    folder, tmp_path, monkeypatch
):
    monkeypatch.setenv("PARALLAX_CHECK_SANDBOX", "auto")
    home = Path(os.environ["PARALLAX_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "parallax.db").write_text("every tenant's traces")
    outside = tmp_path / "outside.txt"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        probe = (
            "import socket, pathlib\npathlib.Path('inside.txt').write_text('ok')\nfor path in"
            f" ({str(outside)!r}, '/etc/parallax-probe',"
            f" {str(Path.home() / 'parallax-probe')!r}):\n    try: open(path, 'w').close();"
            " print('wrote', path)\n    except OSError as exc: print('refused', path,"
            " exc.strerror)\nprint('home', sorted(p.name for p in"
            f" pathlib.Path({str(home)!r}).iterdir()))\nfor host, port in (('127.0.0.1', {port}),"
            " ('1.1.1.1', 80)):\n    try: socket.create_connection((host, port), timeout=3);"
            " print('connected', host)\n    except OSError as exc: print('network', host,"
            " exc.strerror)\n"
        )
        (folder / "probe.py").write_text(probe)
        ran = run(f"{sys.executable} probe.py", folder)
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            pass  # outside the sandbox the port answers
    assert ran.passed and ran.sandbox == BUBBLEWRAP, ran.output
    assert (folder / "inside.txt").read_text() == "ok"
    assert not outside.exists()  # /tmp in the sandbox is its own: the write went nowhere
    assert "refused /etc/parallax-probe Read-only file system" in ran.output
    assert f"refused {Path.home() / 'parallax-probe'} Read-only file system" in ran.output
    assert (
        "home []" in ran.output
    )  # the Parallax home (its database, other runs' folders) is hidden
    # a loopback of its own (nothing listens there) and no route out
    assert (
        "network 127.0.0.1 Connection refused" in ran.output
        and "network 1.1.1.1 Network is unreachable" in ran.output
    )
    assert "connected" not in ran.output


def test_without_bubblewrap_auto_runs_unconfined_and_says_so_and_bwrap_runs_nothing(
    folder, monkeypatch
):
    monkeypatch.setenv("PATH", str(folder))  # no bwrap to be found
    monkeypatch.setenv("PARALLAX_CHECK_SANDBOX", "auto")
    ran = run("/bin/echo hi", folder)
    assert (ran.exit, ran.output, ran.sandbox) == (
        0,
        "hi\n",
        "unconfined (bubblewrap (bwrap) is not installed)",
    )
    monkeypatch.setenv("PARALLAX_CHECK_SANDBOX", "bwrap")
    ran = run(f"/bin/sh -c 'touch {folder / 'ran'}'", folder)
    assert (
        ran.exit is None and "PARALLAX_CHECK_SANDBOX=bwrap runs no command without it" in ran.output
    )
    assert not (folder / "ran").exists()


def test_the_process_limit_counts_on_top_of_what_the_user_runs(monkeypatch):
    """RLIMIT_NPROC counts every process of the user: the limit is what runs now plus
    PARALLAX_CHECK_PROCESSES."""
    import resource

    from parallax.runtime import sandbox as sandbox_mod

    monkeypatch.setenv("PARALLAX_CHECK_PROCESSES", "64")
    monkeypatch.setattr(sandbox_mod.os, "getuid", lambda: 1000)
    monkeypatch.setattr(sandbox_mod, "_user_threads", lambda uid: 300)
    monkeypatch.setattr(
        sandbox_mod.resource,
        "getrlimit",
        lambda kind: (resource.RLIM_INFINITY, resource.RLIM_INFINITY),
    )
    limits = dict(sandbox_mod._rlimits(sandbox_mod.Limits.for_timeout(9.5)))
    assert limits[resource.RLIMIT_NPROC] == (364, 364) and limits[resource.RLIMIT_CPU] == (10, 11)
    assert limits[resource.RLIMIT_CORE] == (0, 0)


@bwrap_only
def test_a_speculate_run_says_its_checks_ran_in_bubblewrap_and_shows_them_no_secret(
    scripted_endpoint, monkeypatch
):
    """End to end on the CLI: a check that prints its environment; the run's branches and `parallax
    trace` say where the checks ran."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PARALLAX_CHECK_SANDBOX", "auto")
    scripted_endpoint(
        FaultConfig(
            reply=lambda body: json.dumps({"reasoning": "r", "answer": "print(1)", "files": []})
        )
    )
    result = runner.invoke(
        app,
        [
            "run",
            "Write a program.",
            "--mode",
            "speculate",
            "--candidates",
            "2",
            "--check",
            "env",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    checks = [
        b["speculation"]["check"]
        for b in out["branches"]
        if b["kind"] == "candidate" and b["speculation"]["check"]
    ]
    assert checks and all(c["sandbox"] == BUBBLEWRAP and c["passed"] for c in checks)
    assert not any(name in c["output"] or VALUE in c["output"] for c in checks for name in SECRETS)
    shown = runner.invoke(app, ["trace", out["trace_id"]], env={"COLUMNS": "200"})
    assert "candidates (picked by check; checks: bubblewrap)" in shown.stdout


def test_a_served_run_runs_no_command(folder):
    """Under the nodes' own refusal: the runner itself runs nothing in a served run
    (runtime/run_context.py)."""
    from langchain_core.runnables.config import var_child_runnable_config

    from parallax.runtime.run_context import AUTH_TENANT_FIELD, NotServed

    token = var_child_runnable_config.set(
        {"configurable": {"langgraph_auth_user": {AUTH_TENANT_FIELD: "acme"}}}
    )
    try:
        with pytest.raises(NotServed, match="running a command is not served over the graph API"):
            run(f"touch {folder / 'pwned'}", folder)
    finally:
        var_child_runnable_config.reset(token)
    assert list(folder.iterdir()) == []
