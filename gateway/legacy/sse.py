"""Incremental Server-Sent Events parser (WHATWG rules) for backend streams.

Fed raw bytes as they arrive; yields complete events. Kept free of aiohttp so it can be tested
on byte strings split at every position.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str
    id: str | None
    retry: int | None


class SSEParser:
    """Feed bytes, iterate events. Lines end in CRLF, LF or CR; ``:`` lines are comments."""

    def __init__(self, max_event_bytes: int = 16 * 1024 * 1024) -> None:
        self._buf = b""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None
        self._size = 0
        self._max = max_event_bytes

    def feed(self, chunk: bytes) -> Iterator[SSEEvent]:
        self._buf += chunk
        while True:
            line, found = self._next_line()
            if not found:
                break
            event = self._line(line)
            if event is not None:
                yield event
        if len(self._buf) > self._max:
            raise ValueError("SSE line exceeds the size limit")

    def _next_line(self) -> tuple[bytes, bool]:
        buf = self._buf
        for i, byte in enumerate(buf):
            if byte == 0x0A:  # LF
                self._buf = buf[i + 1 :]
                return buf[:i], True
            if byte == 0x0D:  # CR or CRLF; a trailing CR may be half of a CRLF split across chunks
                if i + 1 == len(buf):
                    return b"", False
                self._buf = buf[i + 2 :] if buf[i + 1] == 0x0A else buf[i + 1 :]
                return buf[:i], True
        return b"", False

    def _line(self, raw: bytes) -> SSEEvent | None:
        line = raw.decode("utf-8", errors="replace")
        if line == "":
            if not self._data and not self._event:
                self._reset()
                return None
            event = SSEEvent(self._event or "message", "\n".join(self._data), self._id, self._retry)
            self._reset()
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._size += len(value)
            if self._size > self._max:
                raise ValueError("SSE event exceeds the size limit")
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
        self._size = 0
