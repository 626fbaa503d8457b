"""A replica's logs are plain text when they are not written to a terminal.

Aegra's logging set-up (aegra_api.utils.setup_logging, run when aegra_api.main is imported) renders
every record with structlog's ConsoleRenderer and `colors=True`, whatever the stream, so a replica
whose output goes to a file, journald or a log shipper wrote ANSI colour codes into it. Here the
renderer is swapped for the same one without colours (and with plain tracebacks) when the log
stream is not a terminal or `NO_COLOR` is set; `FORCE_COLOR` keeps the colours. Aegra's production
mode (`ENV_MODE=PRODUCTION`, JSON lines) has no ConsoleRenderer and is left as it is.
"""

from __future__ import annotations

import logging
import os
from typing import Any, TextIO


def wants_colour(stream: TextIO) -> bool:
    """Colours only on a terminal, unless NO_COLOR says never or FORCE_COLOR says always (the no-color.org rules)."""
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def plain_unless_terminal(stream: TextIO) -> int:
    """Replace each coloured ConsoleRenderer of the root logger's formatters by a plain one unless `stream`
    wants colours; how many it replaced."""
    import structlog

    if wants_colour(stream):
        return 0
    replaced = 0
    for handler in logging.getLogger().handlers:
        processors: list[Any] | None = getattr(handler.formatter, "processors", None)
        for i, processor in enumerate(processors or []):
            if isinstance(processor, structlog.dev.ConsoleRenderer):
                processors[i] = structlog.dev.ConsoleRenderer(colors=False, pad_level=True,  # type: ignore[index]
                                                              exception_formatter=structlog.dev.plain_traceback)
                replaced += 1
    return replaced
