"""Incremental Server-Sent Events parser (WHATWG rules) for backend streams.

Fed raw bytes as they arrive; yields complete events. Kept free of aiohttp so it can be tested
on byte strings split at every position.

Every backend byte is attacker-controlled, so the parser is linear in the bytes it is fed and its
memory is bounded:

* line ends are found by one regular-expression scan of each new chunk (C speed, never a Python
  loop per byte), and only the new chunk is scanned: an unfinished line is kept as a list of
  pieces, joined once when its end arrives (never re-scanned, never re-copied per chunk);
* everything received since the last dispatched event - data, comments, unknown fields, the
  unfinished line - counts against ``max_event_bytes``. An endless line, an endless event or a
  flood of comments ends in :class:`SSELimitError` once that budget is spent, never in unbounded
  growth or a stream that is parsed forever without producing anything.

How long one call to :meth:`SSEParser.feed` may hold the event loop is the caller's business:
:func:`gateway.legacy.wire.sse_events` feeds bounded slices and yields to the loop between them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024

_LINE_END = re.compile(rb"\r\n|\r|\n")


class SSELimitError(ValueError):
    """The stream sent more than the allowed bytes without completing an event."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str
    id: str | None
    retry: int | None


class SSEParser:
    """Feed bytes, iterate events. Lines end in CRLF, LF or CR; ``:`` lines are comments."""

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._partial: list[bytes] = []
        """Pieces of the line whose end has not arrived yet."""
        self._partial_len = 0
        self._skip_lf = False
        """The last chunk ended in CR: a LF at the start of the next one is the rest of a CRLF."""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None
        self._since_event = 0
        """Bytes of complete lines received since the last dispatched event."""
        self._max = max_event_bytes

    def feed(self, chunk: bytes) -> Iterator[SSEEvent]:
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
        start = 0
        for match in _LINE_END.finditer(chunk):
            end = match.start()
            if self._partial:
                self._partial.append(chunk[start:end])
                line = b"".join(self._partial)
                self._partial = []
                self._partial_len = 0
            else:
                line = chunk[start:end]
            start = match.end()
            self._since_event += len(line) + (start - end)
            if self._since_event > self._max:
                raise SSELimitError("SSE event exceeds the size limit")
            event = self._line(line)
            if event is not None:
                yield event
        if chunk.endswith(b"\r"):
            self._skip_lf = True  # a CR at the very end may be half of a CRLF split across chunks
        if start < len(chunk):
            piece = chunk[start:]
            self._partial.append(piece)
            self._partial_len += len(piece)
            if self._since_event + self._partial_len > self._max:
                raise SSELimitError("SSE line exceeds the size limit")

    @property
    def buffered(self) -> int:
        """Bytes held for the event being received (unfinished line included)."""
        return self._since_event + self._partial_len

    def mid_event(self) -> bool:
        """Part of an event has arrived and its end has not."""
        return self._since_event + self._partial_len > 0

    def _line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            if not self._data and not self._event:
                self._reset()
                return None
            event = SSEEvent(self._event or "message", "\n".join(self._data), self._id, self._retry)
            self._reset()
            self._since_event = 0
            return event
        if raw[0] == 0x3A:  # ":" - a comment; not even decoded
            return None
        field, _, value = raw.decode("utf-8", errors="replace").partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        elif field == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _reset(self) -> None:
        self._event = ""
        self._data = []
        self._retry = None
