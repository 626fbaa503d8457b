"""Each speculative candidate's own folder, where its answer is written and its check runs.

A worktree of the repository's HEAD, or an empty folder, under PARALLAX_HOME; removed when the
candidate is done. See docs/internals/untrusted-input.md#code-the-model-wrote.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from parallax.runtime.run_context import refuse_when_served
from parallax.runtime.sandbox import run_command
from parallax.runtime.worktrees import Worktree, head_commit, path_part, work_folder
from parallax.state.records import CheckResult

OUTPUT_CHARS = 3000


def folder_of(trace_id: str, candidate_id: str) -> Path:
    return work_folder("candidates", trace_id, candidate_id)


def branch_of(trace_id: str, candidate_id: str) -> str:
    return (
        f"parallax/{path_part(trace_id, 'trace id')[:8]}/{path_part(candidate_id, 'candidate id')}"
    )


@dataclass
class CheckFolder:
    tree: Worktree
    in_repo: bool

    @classmethod
    def create(cls, trace_id: str, candidate_id: str, repo: str) -> CheckFolder:
        """A fresh folder for the candidate (a leftover of a killed run is replaced)."""
        refuse_when_served("a check folder")
        where = folder_of(trace_id, candidate_id)
        if repo:
            root = Path(repo)
            return cls(
                Worktree.create(
                    root, branch_of(trace_id, candidate_id), head_commit(root), where, []
                ),
                True,
            )
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        return cls(Worktree(where, where, "", ""), False)

    def write(self, path: str, content: str) -> str:
        """Write one file inside the folder (PathRefused for a path outside it)."""
        return self.tree.write(path, content)

    def remove(self) -> None:
        if self.in_repo:
            self.tree.remove(delete_branch=True)
        else:
            shutil.rmtree(self.tree.root, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.tree.root.parent.rmdir()  # the run's folder, once its last candidate is gone


async def run_check(
    command: str, folder: Path, file: Path, timeout_s: float, readable: Sequence[Path] = ()
) -> CheckResult:
    """Run `command` in `folder` (the candidate's file at `file`, also in PARALLAX_CANDIDATE_FILE),
    confined (runtime/sandbox.py; `readable`: the repository a worktree belongs to); exit 0 passes.
    `sandbox` says where it ran. Cancelled: everything it started is killed and the cancellation
    goes on."""
    ran = await run_command(
        command,
        folder,
        timeout_s,
        env={"PARALLAX_CANDIDATE_FILE": str(file)},
        readable=readable,
        output_chars=OUTPUT_CHARS,
    )
    return {
        "passed": ran.passed,
        "exit": ran.exit,
        "output": ran.output,
        "timed_out": ran.timed_out,
        "seconds": ran.seconds,
        "finished_at": time.time(),
        "sandbox": ran.sandbox,
    }
