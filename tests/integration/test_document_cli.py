"""`parallax run --input-file` as a real process: what reaches the terminal when a document cannot
be read."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.unit.test_documents import REPORT, make_pdf


def test_a_real_process_prints_one_line_on_stderr_for_a_truncated_pdf(tmp_path):
    """Not through CliRunner: pypdf's own log lines ("EOF marker not found") must not reach the real
    stderr."""
    path = tmp_path / "cut.pdf"
    path.write_bytes(make_pdf(REPORT)[:900])
    # the closed port the unit tests' conftest gives every test: no run may reach a model, embedded
    # or not
    env = {
        **os.environ,
        "PARALLAX_HOME": str(tmp_path / "home"),
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "parallax.cli",
            "run",
            "-f",
            str(path),
            "--mode",
            "section",
            "-q",
            "revenue?",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr.strip()
        == f"error: {path} is a truncated PDF (it does not end with %%EOF): download or export it"
        " again"
    )
    assert not (tmp_path / "home").exists()
