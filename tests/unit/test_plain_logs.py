"""A replica's log lines carry no colour codes when written to a file (runtime/plain_logs.py); a
terminal keeps them.

The handler is built as Aegra's logging set-up builds it (structlog's ProcessorFormatter,
ConsoleRenderer with colors=True on the root logger); tests/integration/test_first_hour.py reads a
real replica's log file.
"""

from __future__ import annotations

import io
import logging

import pytest
import structlog

from parallax.runtime.plain_logs import plain_unless_terminal


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def aegra_like_root():
    """The root logger as aegra_api.utils.setup_logging leaves it (in its LOCAL mode), writing to a
    buffer."""
    root = logging.getLogger()
    saved = root.handlers[:]
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.dev.ConsoleRenderer(colors=True),
            ],
            foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.ExtraAdder()],
        )
    )
    root.handlers = [handler]
    try:
        yield written
    finally:
        root.handlers = saved


def test_logs_to_a_file_are_plain_text(aegra_like_root, monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    logging.getLogger("parallax.test").warning("the replica is ready")
    assert (
        "\x1b[" in aegra_like_root.getvalue()
    )  # Aegra's renderer as it comes: colour codes, even into a file
    assert plain_unless_terminal(io.StringIO()) == 1
    aegra_like_root.seek(0)
    aegra_like_root.truncate()
    logging.getLogger("parallax.test").warning("the replica is ready")
    logging.getLogger("parallax.test.uvicorn").warning(
        "Started server process [%d]",
        7,  # as uvicorn logs it
        extra={"color_message": "Started server process [\x1b[36m%d\x1b[0m]"},
    )
    lines = aegra_like_root.getvalue()
    assert (
        "the replica is ready" in lines
        and "warning" in lines
        and "Started server process [7]" in lines
    )
    assert "\x1b[" not in lines and "color_message" not in lines


def test_a_terminal_keeps_its_colours_and_no_color_turns_them_off(aegra_like_root, monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert plain_unless_terminal(Terminal()) == 0
    monkeypatch.setenv("NO_COLOR", "1")
    assert plain_unless_terminal(Terminal()) == 1
