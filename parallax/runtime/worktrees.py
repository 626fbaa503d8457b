"""Git worktrees for `edit` tasks: isolated folders, a small tool set, merges checked beforehand.

See docs/plan.md and docs/internals/untrusted-input.md#code-the-model-wrote.
"""

from __future__ import annotations

import builtins
import difflib
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from parallax.runtime import settings as settings_mod
from parallax.runtime.run_context import refuse_when_served

GIT_TIMEOUT_S = 60
READ_CHARS = 20_000
LIST_FILES = 200
IDENTITY = (
    "-c",
    "user.name=parallax",
    "-c",
    "user.email=parallax@localhost",
    "-c",
    "commit.gpgsign=false",
)


_repo_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def repo_lock(repo: Path | str) -> threading.Lock:
    """One lock per repository for what changes its shared admin files (worktrees, branches):
    several candidates or tasks making and removing worktrees of one repository at once otherwise
    fail on git's own locks.
    """
    key = str(Path(repo).resolve())
    with _locks_lock:
        return _repo_locks.setdefault(key, threading.Lock())


class GitError(RuntimeError):
    """A git command failed; the message holds the command and git's own words."""


class PathRefused(ValueError):
    """A tool was asked for a path outside its worktree, or to write a file the task did not
    declare."""


PART_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")


def path_part(value: object, what: str) -> str:
    """`value`, if it is one plain folder name (letters, digits, '.', '_', '-'; no separator, no
    '..'), else PathRefused: an id that becomes a path can name no other folder."""
    if not isinstance(value, str) or not PART_RE.match(value) or ".." in value:
        raise PathRefused(
            f"bad {what} {value!r}: a folder name of 1-128 letters, digits, '.', '_' or '-' "
            "(no '/', no '..')"
        )
    return value


def work_folder(kind: str, *parts: str) -> Path:
    """PARALLAX_HOME/`kind`/`parts`..., each part checked by `path_part` (a run's and a task's
    ids)."""
    return (
        (settings_mod.load().home / kind).resolve().joinpath(*(path_part(p, "id") for p in parts))
    )


def git(repo: Path | str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    refuse_when_served("opening a repository")
    done = subprocess.run(
        ["git", "-C", str(repo), *IDENTITY, *args],
        capture_output=True,
        text=True,  # nosec B603 B607
        timeout=GIT_TIMEOUT_S,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )  # the user's git, no shell
    if check and done.returncode != 0:
        raise GitError(f"git {' '.join(args[:3])}: {(done.stderr or done.stdout).strip()[:300]}")
    return done


def repository_root(path: str | Path) -> Path:
    """The top folder of the git repository at `path` (GitError if there is none or it has no
    commit)."""
    where = Path(path).expanduser()
    if not where.is_dir():
        raise GitError(f"{where} is not a folder")
    root = Path(git(where, "rev-parse", "--show-toplevel").stdout.strip())
    git(root, "rev-parse", "--verify", "HEAD^{commit}")
    return root


def head_commit(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def branch_exists(repo: Path, branch: str) -> bool:
    return (
        git(
            repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False
        ).returncode
        == 0
    )


@dataclass
class Worktree:
    """One edit task's checkout and the tools bound to it."""

    repo: Path
    root: Path
    branch: str
    base: str
    writes: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, repo: Path, branch: str, base: str, where: Path, writes: list[str]) -> Worktree:
        """A fresh worktree at `where` on `branch`, reset to `base` (a leftover of a killed run is
        replaced)."""
        with repo_lock(repo):
            if where.exists():
                git(repo, "worktree", "remove", "--force", str(where), check=False)
                shutil.rmtree(where, ignore_errors=True)
            git(repo, "worktree", "prune")
            where.parent.mkdir(parents=True, exist_ok=True)
            git(repo, "worktree", "add", "--force", "-B", branch, str(where), base)
        return cls(repo, where.resolve(), branch, base, list(writes))

    def resolve(self, path: str) -> Path:
        """The file `path` names inside the worktree; PathRefused for anything that leaves it."""
        pure = PurePosixPath(path or ".")
        if pure.is_absolute() or ".." in pure.parts:
            raise PathRefused(
                f"{path!r} is outside the worktree: use a path relative to the repository root"
            )
        target = (self.root / pure).resolve()
        if not target.is_relative_to(self.root) or ".git" in target.relative_to(self.root).parts:
            raise PathRefused(f"{path!r} is outside the worktree")
        return target

    def list(self, path: str = ".") -> str:
        folder = self.resolve(path)
        if not folder.is_dir():
            raise PathRefused(f"{path!r} is not a folder")
        files = sorted(
            str(p.relative_to(self.root))
            for p in folder.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(self.root).parts
        )
        return "\n".join(files[:LIST_FILES]) + (
            f"\n... and {len(files) - LIST_FILES} more" if len(files) > LIST_FILES else ""
        )

    def read(self, path: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise PathRefused(f"{path!r} is not a file")
        return target.read_text(encoding="utf-8", errors="replace")[:READ_CHARS]

    def write(self, path: str, content: str) -> str:
        target = self.resolve(path)
        relative = target.relative_to(self.root).as_posix()
        if self.writes and not any(
            relative == w.rstrip("/") or relative.startswith(w.rstrip("/") + "/")
            for w in self.writes
        ):
            raise PathRefused(
                f"{relative!r} is not among the files this task declared ({', '.join(self.writes)})"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {relative} ({len(content)} characters)"

    def commit(self, message: str) -> str | None:
        """Commit everything the task changed on its branch; the new commit, or None when nothing
        changed."""
        git(self.root, "add", "-A")
        if git(self.root, "diff", "--cached", "--quiet", check=False).returncode == 0:
            return None
        git(self.root, "commit", "-q", "--no-verify", "-m", message)
        return head_commit(self.root)

    def changed_files(self) -> builtins.list[str]:  # `list` is a method of this class
        return git(self.repo, "diff", "--name-only", self.base, self.branch).stdout.split()

    def remove(self, delete_branch: bool = False) -> None:
        """Remove the worktree (and, with `delete_branch`, its branch: a candidate that lost)."""
        with repo_lock(self.repo):
            git(self.repo, "worktree", "remove", "--force", str(self.root), check=False)
            shutil.rmtree(self.root, ignore_errors=True)
            git(self.repo, "worktree", "prune", check=False)
            if delete_branch:
                git(self.repo, "branch", "-D", self.branch, check=False)


@dataclass
class MergeCheck:
    clean: bool
    tree: str
    conflicts: list[str]
    messages: str


def check_merge(repo: Path, ours: str, theirs: str) -> MergeCheck:
    """`git merge-tree --write-tree ours theirs`: would the merge be clean, and which files
    conflict."""
    done = git(
        repo, "merge-tree", "--write-tree", "--name-only", "--messages", ours, theirs, check=False
    )
    if done.returncode not in (0, 1):
        raise GitError(f"git merge-tree: {(done.stderr or done.stdout).strip()[:300]}")
    tree, _, rest = done.stdout.partition("\n")
    files, _, messages = rest.partition("\n\n")
    return MergeCheck(
        done.returncode == 0,
        tree.strip(),
        [f for f in files.splitlines() if f.strip()],
        messages.strip(),
    )


class Integration:
    """The branch the clean edit branches are merged into, one `commit-tree` at a time, in plan
    order."""

    def __init__(self, repo: Path, branch: str, base: str) -> None:
        self.repo, self.branch, self.base = repo, branch, base
        if not branch_exists(repo, branch):
            git(repo, "branch", branch, base)

    @property
    def head(self) -> str:
        return git(self.repo, "rev-parse", f"refs/heads/{self.branch}").stdout.strip()

    def merge(self, branch: str, message: str) -> MergeCheck:
        """Merge `branch` if that is clean (the integration branch moves); otherwise only report."""
        head = self.head
        found = check_merge(self.repo, head, branch)
        if found.clean:
            tip = git(self.repo, "rev-parse", branch).stdout.strip()
            commit = git(
                self.repo, "commit-tree", found.tree, "-p", head, "-p", tip, "-m", message
            ).stdout.strip()
            git(self.repo, "update-ref", f"refs/heads/{self.branch}", commit, head)
        return found

    def diff(self, branch: str, since: str) -> str:
        return git(self.repo, "diff", since, branch).stdout[:6000]

    def dropped_lines(self, branch: str, since: str) -> list[str]:
        """Lines the integration branch gained after `since` that `branch` no longer has in the
        files it changed.

        A task redone on the new base that writes whole files from its old view would undo the
        other tasks' merged work without any textual conflict; this finds that."""
        lost: list[str] = []
        for path in git(self.repo, "diff", "--name-only", self.head, branch).stdout.split():
            before = _lines(self.repo, since, path)
            merged = _lines(self.repo, self.head, path)
            theirs = set(_lines(self.repo, branch, path))
            added = [
                line[2:]
                for line in difflib.ndiff(before, merged)
                if line.startswith("+ ") and line[2:].strip()
            ]
            lost += [f"{path}: {line}" for line in added if line not in theirs]
        return lost


def _lines(repo: Path, commit: str, path: str) -> list[str]:
    done = git(repo, "show", f"{commit}:{path}", check=False)
    return done.stdout.splitlines() if done.returncode == 0 else []
