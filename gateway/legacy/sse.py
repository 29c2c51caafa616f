"""Incremental Server-Sent Events parser (WHATWG rules) for backend streams.

Fed raw bytes as they arrive; yields complete events. Kept free of aiohttp so it can be tested
on byte strings split at every position.

Every backend byte is attacker-controlled, so the parser is linear in the bytes it is fed and its
memory is bounded:

* line ends are found with ``bytes.find`` (``memchr``: a 4 MiB line is scanned in a fraction of a
  millisecond, where a regular expression took about 50 ms), each byte of a chunk at most once for
  LF and once for CR, and only the new chunk is scanned: an unfinished line is kept as a list of
  pieces, joined once when its end arrives (never re-scanned, never re-copied per chunk);
* a ``data`` value stays bytes (a view of its line, not a copy) until its event is dispatched, and
  is then decoded once; only the small fields (``event``, ``id``, ``retry``) are decoded per line.
  Decoding the joined bytes gives the same text as decoding each line and joining the texts: LF is
  one byte no UTF-8 sequence contains, so a replaced invalid sequence never spans two lines;
* everything received since the last dispatched event - data, comments, unknown fields, the
  unfinished line - counts against ``max_event_bytes``. An endless line, an endless event or a
  flood of comments ends in :class:`SSELimitError` once that budget is spent, never in unbounded
  growth or a stream that is parsed forever without producing anything.

How long one call to :meth:`SSEParser.feed` may hold the event loop is the caller's business:
:func:`gateway.legacy.wire.sse_events` feeds bounded slices and yields to the loop between them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024


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
        self._data: list[memoryview] = []
        """The event's ``data`` values, undecoded (views of their lines)."""
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
        size = len(chunk)
        start = 0
        # The next LF and the next CR at or after ``start`` (-1: none left in this chunk). Each is
        # searched again only once ``start`` has passed it, so every byte is scanned at most once
        # for each of them, however many lines the chunk holds.
        lf = chunk.find(b"\n")
        cr = chunk.find(b"\r")
        while lf >= 0 or cr >= 0:
            if cr < 0 or 0 <= lf < cr:
                end, after = lf, lf + 1
            elif cr + 1 < size and chunk[cr + 1] == 0x0A:
                end, after = cr, cr + 2
            else:
                end, after = cr, cr + 1
            if self._partial:
                self._partial.append(chunk[start:end])
                line = b"".join(self._partial)
                self._partial = []
                self._partial_len = 0
            else:
                line = chunk[start:end]
            start = after
            self._since_event += len(line) + (after - end)
            if self._since_event > self._max:
                raise SSELimitError("SSE event exceeds the size limit")
            event = self._line(line)
            if event is not None:
                yield event
            if 0 <= lf < start:
                lf = chunk.find(b"\n", start)
            if 0 <= cr < start:
                cr = chunk.find(b"\r", start)
        if chunk.endswith(b"\r"):
            self._skip_lf = True  # a CR at the very end may be half of a CRLF split across chunks
        if start < size:
            piece = chunk[start:] if start else chunk
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
            event = SSEEvent(self._event or "message", self._data_text(), self._id, self._retry)
            self._reset()
            self._since_event = 0
            return event
        if raw[0] == 0x3A:  # ":" - a comment; not even decoded
            return None
        colon = raw.find(b":")
        if colon < 0:
            field, value = raw, memoryview(b"")
        else:
            field = raw[:colon]
            skip = 2 if raw[colon + 1 : colon + 2] == b" " else 1
            value = memoryview(raw)[colon + skip :]
        if field == b"data":
            self._data.append(value)
        elif field == b"event":
            self._event = str(value, "utf-8", "replace")
        elif field == b"id":
            text = str(value, "utf-8", "replace")
            if "\0" not in text:
                self._id = text
        elif field == b"retry":
            text = str(value, "utf-8", "replace")
            if text.isdigit():
                self._retry = int(text)
        return None

    def _data_text(self) -> str:
        """The event's data lines, joined with LF and decoded once (invalid UTF-8 replaced)."""
        if len(self._data) == 1:
            return str(self._data[0], "utf-8", "replace")
        return b"\n".join(self._data).decode("utf-8", "replace")

    def _reset(self) -> None:
        self._event = ""
        self._data = []
        self._retry = None
