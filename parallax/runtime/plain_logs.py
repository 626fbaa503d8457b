"""A replica's logs in plain text, without colour codes, when they are not written to a terminal.

See docs/internals/process.md#a-replicas-logs.
"""

from __future__ import annotations

import logging
import os
from typing import Any, TextIO


def wants_colour(stream: TextIO) -> bool:
    """Colours only on a terminal, unless NO_COLOR says never or FORCE_COLOR says always (the
    no-color.org rules)."""
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def drop_colour_message(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """uvicorn passes its coloured text of a message as the record's extra `color_message`; plain
    logs leave it out."""
    event.pop("color_message", None)
    return event


def plain_unless_terminal(stream: TextIO) -> int:
    """Replace each coloured ConsoleRenderer of the root logger's formatters by a plain one unless
    `stream` wants colours; how many it replaced."""
    import structlog

    if wants_colour(stream):
        return 0
    replaced = 0
    for handler in logging.getLogger().handlers:
        processors: list[Any] | None = getattr(handler.formatter, "processors", None)
        for i, processor in enumerate(list(processors or [])):
            if isinstance(processor, structlog.dev.ConsoleRenderer) and processors is not None:
                processors[i : i + 1] = [
                    drop_colour_message,
                    structlog.dev.ConsoleRenderer(
                        colors=False,
                        pad_level=True,
                        exception_formatter=structlog.dev.plain_traceback,
                    ),
                ]
                replaced += 1
    return replaced


def plain_aegra_logs(stream: TextIO) -> None:
    """Have Aegra's logging set-up end with `plain_unless_terminal(stream)`. Called before
    aegra_api.main is imported (uvicorn imports it), whose import runs the set-up and logs its first
    lines at once."""
    import importlib

    module = importlib.import_module(
        "aegra_api.utils.setup_logging"
    )  # the module: utils may export the function

    aegra_setup = module.setup_logging

    def setup_logging() -> None:
        aegra_setup()
        plain_unless_terminal(stream)

    module.__dict__["setup_logging"] = setup_logging
