"""Where code the model wrote runs: a speculate candidate's check, an edit task's test command.

Scrubbed environment, resource limits, its own process group, and bubblewrap when it works.
See docs/how-it-works.md#where-checks-and-test-commands-run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import resource
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from parallax.runtime import settings as settings_mod
from parallax.runtime.run_context import refuse_when_served

ALLOWED_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TERM",
    "TMPDIR",
    "VIRTUAL_ENV",
    "PYTHONPATH",
)
"""The variables of Parallax's environment a command sees; nothing else (keys, URLs, settings) is
passed on."""
BUBBLEWRAP = "bubblewrap"
UNCONFINED = "unconfined"
KEEP_BYTES = 64_000
"""The most output kept while a command runs (its tail): a command that prints without end costs no
memory."""
PIPE_GRACE_S = 1.0
ADDRESS_SPACE_FACTOR = 4
"""A process's address space may be this many times PARALLAX_CHECK_MEMORY_MB (Java reserves 1 GiB it
never uses for class metadata alone and fails to start under 2 GiB of address space)."""


@dataclass(frozen=True)
class Limits:
    """What one command's processes may use (each process: rlimits are per process, and
    inherited)."""

    cpu_s: int
    memory_bytes: int
    file_bytes: int
    processes: int

    @classmethod
    def for_timeout(cls, timeout_s: float) -> Limits:
        """The settings' limits, with the timeout as the CPU seconds (a process that spins is
        stopped by both)."""
        settings = settings_mod.load()
        return cls(
            max(1, math.ceil(timeout_s)),
            settings.check_memory_mb * 2**20,
            settings.check_file_mb * 2**20,
            settings.check_processes,
        )


@dataclass
class Ran:
    """How a command ended: `exit` None when it could not start; `output` is its stdout and stderr's
    tail."""

    exit: int | None
    output: str
    timed_out: bool
    seconds: float
    sandbox: str
    """"bubblewrap", or "unconfined" with the reason (no bubblewrap, it does not work here, or it is
    off)."""

    @property
    def passed(self) -> bool:
        return self.exit == 0 and not self.timed_out


def scrubbed_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a command gets: the allowed variables that are set, then `extra`."""
    env = {name: os.environ[name] for name in ALLOWED_ENV if name in os.environ}
    env.setdefault("PATH", os.defpath)
    return {**env, **(extra or {})}


@functools.cache
def _bubblewrap_fault(binary: str) -> str | None:
    """Why `binary` cannot make a sandbox here (None: it can): tried once per process."""
    try:
        done = subprocess.run(
            [
                binary,
                "--ro-bind",
                "/",
                "/",
                "--unshare-all",
                "--die-with-parent",
                "--",
                "true",
            ],  # nosec B603
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap does not start: {exc}"
    return (
        None
        if done.returncode == 0
        else f"bubblewrap does not work here: {done.stderr.strip()[:200]}"
    )


def sandbox_mode() -> tuple[str | None, str]:
    """(the bwrap binary to run commands in, or None; what the result says about where they ran)."""
    mode = settings_mod.load().check_sandbox
    if mode == "off":
        return None, f"{UNCONFINED} (PARALLAX_CHECK_SANDBOX=off)"
    binary = shutil.which("bwrap")
    fault = "bubblewrap (bwrap) is not installed" if binary is None else _bubblewrap_fault(binary)
    if fault is None:
        return binary, BUBBLEWRAP
    if mode == "bwrap":
        raise SandboxMissing(
            f"{fault}, and PARALLAX_CHECK_SANDBOX=bwrap runs no command without it: install "
            "bubblewrap, or set PARALLAX_CHECK_SANDBOX=auto"
        )
    return None, f"{UNCONFINED} ({fault})"


class SandboxMissing(RuntimeError):
    """PARALLAX_CHECK_SANDBOX=bwrap, and bubblewrap cannot run here."""


def bubblewrap_argv(binary: str, folder: Path, readable: Sequence[Path]) -> list[str]:
    """bwrap's options: the system read-only, /tmp and /run fresh, the Parallax home hidden,
    `readable` (a repository the folder is a worktree of, files the command names) read-only where
    they are, `folder` writable, no network, namespaces of its own."""
    # mount points bubblewrap covers with fresh tmpfs, not files made here (bandit B108)
    hidden = [
        "/tmp",
        *(p for p in ("/run", "/var/run") if os.path.isdir(p) and not os.path.islink(p)),
    ]  # nosec B108
    home = settings_mod.load().home.resolve()
    if home.is_dir():
        hidden.append(str(home))
    argv = [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for root in hidden:
        argv += ["--tmpfs", root]
    for path in readable:  # what is not under a hidden folder is read-only already
        if any(path.is_relative_to(root) for root in hidden):
            argv += ["--ro-bind", str(path.resolve()), str(path)]
    argv += [
        "--bind",
        str(folder),
        str(folder),
        "--chdir",
        str(folder),
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--",
    ]
    return argv


def _user_threads(uid: int) -> int | None:
    """Threads (what RLIMIT_NPROC counts) of the processes of real user `uid` now; None where /proc
    cannot tell."""
    total = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for name in entries:
        if not name.isdigit():
            continue
        owner = threads = None
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as status:
                for line in status:
                    if line.startswith("Uid:"):
                        owner = int(line.split()[1])
                    elif line.startswith("Threads:"):
                        threads = int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if owner == uid and threads:
            total += threads
    return total


def _rlimits(limits: Limits) -> list[tuple[int, tuple[int, int]]]:
    """The limits to set, each no higher than the hard limit Parallax itself runs under."""
    wanted = [
        (
            resource.RLIMIT_CPU,
            limits.cpu_s,
            limits.cpu_s + 1,
        ),  # SIGXCPU, then SIGKILL a second later
        (
            resource.RLIMIT_DATA,
            limits.memory_bytes,
            limits.memory_bytes,
        ),  # what it writes: heap, anonymous maps
        # what it may reserve: a JVM or V8 reserves far more than it uses, so only a ceiling
        (
            resource.RLIMIT_AS,
            ADDRESS_SPACE_FACTOR * limits.memory_bytes,
            ADDRESS_SPACE_FACTOR * limits.memory_bytes,
        ),
        (resource.RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    uid = os.getuid()
    running = (
        0 if uid == 0 else _user_threads(uid)
    )  # root: not enforced by Linux; set for what it is worth
    if running is not None:
        wanted.append(
            (resource.RLIMIT_NPROC, running + limits.processes, running + limits.processes)
        )
    found = []
    for kind, soft, hard in wanted:
        _, ceiling = resource.getrlimit(kind)
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        found.append((kind, (soft, hard)))
    return found


def _limiter(rlimits: list[tuple[int, tuple[int, int]]]) -> Callable[[], None]:
    """What the child runs between fork and exec: only `setrlimit` calls, on values worked out
    beforehand."""

    def apply() -> None:
        for kind, value in rlimits:
            resource.setrlimit(kind, value)

    return apply


def _descendants(pid: int) -> list[int]:
    """Every process under `pid` now (by /proc's parent links), children first; [] where /proc
    cannot tell."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            parents.setdefault(int(fields[1]), []).append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    found, queue = [], [pid]
    while queue:
        children = parents.get(queue.pop(), [])
        found += children
        queue += children
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL the process group `pid` leads and every descendant of `pid` (one that left the group
    too). Only for a `pid` not yet reaped: its number cannot have passed to another process."""
    family = _descendants(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for child in family:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)


async def _tail(stream: asyncio.StreamReader) -> bytes:
    kept = bytearray()
    while chunk := await stream.read(65536):
        kept += chunk
        if len(kept) > KEEP_BYTES:
            del kept[:-KEEP_BYTES]
    return bytes(kept)


async def _exit_of(process: subprocess.Popen[bytes]) -> None:
    """Return once `process` has ended, without reaping it (so its number stays its own while its
    tree is killed): a pidfd where Linux has them, else a poll every 20 ms. (asyncio's own processes
    are no use here: their `wait` also waits for the output pipe, which a process left in the
    background holds open.)"""
    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        while _running(process):
            await asyncio.sleep(0.02)
        return
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await ended
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _running(process: subprocess.Popen[bytes]) -> bool:
    """Whether `process` runs (a zombie does not), leaving it unreaped."""
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def _prepare(
    command: str, folder: Path, readable: Sequence[Path], timeout_s: float
) -> tuple[list[str], str, list[tuple[int, tuple[int, int]]]]:
    binary, where = sandbox_mode()
    argv = shlex.split(command)
    if (
        binary is not None
    ):  # the files the user's command names (a check script in /tmp) are read where they are
        named = [Path(arg) for arg in argv if arg.startswith("/") and Path(arg).is_file()]
        argv = (
            bubblewrap_argv(binary, folder, [p for p in [*readable, *named] if p.exists()]) + argv
        )
    return argv, where, _rlimits(Limits.for_timeout(timeout_s))


async def run_command(
    command: str,
    folder: Path,
    timeout_s: float,
    *,
    env: Mapping[str, str] | None = None,
    readable: Sequence[Path] = (),
    output_chars: int = 3000,
) -> Ran:
    """Run `command` (split like a shell would, not run by one) in `folder`, confined as the module
    says, for at most `timeout_s`; `env` is added to the scrubbed environment. Cancelled: everything
    it started is killed and the cancellation goes on. Served: NotServed, and nothing runs."""
    refuse_when_served("running a command")
    started = time.time()
    try:
        argv, where, rlimits = await asyncio.to_thread(
            _prepare, command, folder, readable, timeout_s
        )
    except (SandboxMissing, ValueError) as exc:  # ValueError: unbalanced quotes
        return Ran(None, f"the command could not start: {exc}", False, 0.0, "not run")
    if not argv:
        return Ran(None, "the command could not start: it is empty", False, 0.0, where)
    # inside bubblewrap /tmp is the sandbox's own fresh tmpfs (bandit B108)
    environment = scrubbed_env(
        {**(env or {}), **({"TMPDIR": "/tmp"} if where == BUBBLEWRAP else {})}  # nosec B108
    )
    try:
        # the user's own check or test command, no shell; confining what it runs is this module's
        # job (bandit B603)
        process = subprocess.Popen(
            argv,
            cwd=folder,
            env=environment,
            stdin=subprocess.DEVNULL,  # nosec B603
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_limiter(rlimits),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Ran(None, f"the command could not start: {exc}", False, 0.0, where)
    assert process.stdout is not None
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader()
    pipe, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), process.stdout
    )
    reader = asyncio.ensure_future(_tail(stream))
    timed_out = False
    try:
        try:
            await asyncio.wait_for(_exit_of(process), timeout_s)
        except TimeoutError:
            timed_out = True
        # ended or not, it is not reaped yet: its number still names its group and its tree
        kill_tree(process.pid)
        await asyncio.shield(_exit_of(process))
        process.wait()
        try:
            out = await asyncio.wait_for(asyncio.shield(reader), PIPE_GRACE_S)
        except TimeoutError:  # a process that left the group and its parent still holds the pipe
            out = b""
    except asyncio.CancelledError:
        kill_tree(process.pid)
        with contextlib.suppress(Exception):
            await asyncio.shield(asyncio.to_thread(process.wait))
        raise
    finally:
        reader.cancel()
        pipe.close()
    text = out.decode("utf-8", errors="replace")[-output_chars:]
    return Ran(
        process.returncode,
        f"timed out after {timeout_s:g}s" if timed_out else text,
        timed_out,
        round(time.time() - started, 3),
        where,
    )
