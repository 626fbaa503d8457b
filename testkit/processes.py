"""Stopping a server a test or bench started in a session of its own (`start_new_session=True`)."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(process: subprocess.Popen, timeout_s: float = 20.0) -> None:
    """SIGTERM to the process's whole group, SIGKILL when it is still there after `timeout_s`."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
