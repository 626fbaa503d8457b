"""Kept for importers of the old name: `wait_for_200` lives with the server processes it waits for, in
model_server/process.py (issue 22)."""

from parallax.runtime.model_server.process import wait_for_200

__all__ = ["wait_for_200"]
