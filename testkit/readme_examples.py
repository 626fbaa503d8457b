"""The README's copy-paste examples, run as written (only the address, key or task swapped for the
test's).

Why: an example that no test runs drifts from the code. Each face's section (MCP, chat) has a
Python example; the tests find it by a string it contains and run it in a fresh interpreter,
as a reader pasting it would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_block(containing: str, page: str = "README.md") -> str:
    """The one ```python block of `page` (the README, or a page of docs/) that contains
    `containing`."""
    blocks = [
        b
        for b in re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)
        if containing in b
    ]
    assert len(blocks) == 1, (
        f"expected one {page} python block with {containing!r}, found {len(blocks)}"
    )
    return blocks[0]


def run_block(code: str, env: dict[str, str] | None = None, timeout_s: float = 600) -> str:
    """Run `code` in a fresh interpreter of this venv (its bin first on PATH); its stdout. Fails
    with stderr."""
    bin_dir = str(Path(sys.executable).parent)
    full_env = {
        **os.environ,
        **(env or {}),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
    )
    assert done.returncode == 0, f"the README example failed:\n{done.stderr[-4000:]}"
    return done.stdout
