"""structlog setup: JSON lines when not a TTY, contextvars first, one canonical line per request.

Every string field is truncated to :data:`MAX_FIELD_CHARS` before rendering
(:func:`truncate_strings`): log lines carry client-chosen strings (a JSON-RPC method, a tool
name, a header), and a client must not be able to make one line, or the log volume, as large as
it likes.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Final

import structlog

MAX_FIELD_CHARS: Final = 256
"""Longest string a log field keeps; longer ones are cut and marked with their original length."""
MAX_TRACEBACK_CHARS: Final = 8192
"""A formatted ``exception`` field keeps more: its frames are the gateway's own."""


def truncate(value: str, limit: int = MAX_FIELD_CHARS) -> str:
    return value if len(value) <= limit else f"{value[:limit]}…(+{len(value) - limit} chars)"


def truncate_strings(_logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: cut every string field (keys included) to :data:`MAX_FIELD_CHARS`."""
    out: dict[str, Any] = {}
    for key, value in event_dict.items():
        limit = MAX_TRACEBACK_CHARS if key == "exception" else MAX_FIELD_CHARS
        out[truncate(str(key), 64)] = truncate(value, limit) if isinstance(value, str) else value
    if len(out) > 64:  # a bound on fields too: contextvars bound by code only, but be sure
        out = dict(list(out.items())[:64])
    return out


def configure_logging(level: str = "info", json_logs: bool | None = None) -> None:
    if json_logs is None:
        json_logs = not sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer(colors=False)
    )
    # One printer for every logger: structlog's lazy loggers assemble themselves on each call, and
    # the stock factory builds a new printer (and looks up its file's lock) every time. A printer
    # holds only its file and that file's lock, so sharing it changes nothing but the cost.
    printer = structlog.PrintLogger(file=sys.stderr)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            truncate_strings,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=lambda *_args: printer,
        cache_logger_on_first_use=False,
    )
