"""The backend SSE parser, fed byte streams split at every position."""

from __future__ import annotations

import pytest

from gateway.legacy.sse import SSEParser

STREAM = (
    b'event: message\r\ndata: {"a":1}\r\n\r\n'
    b": keep-alive comment\n\n"
    b"id: 5\nretry: 300\ndata:\n\n"
    b"data: x\rdata: y\r\r\n"
    b"event: endpoint\ndata: /messages/?session_id=abc\n\n"
)
EXPECTED = [
    ("message", '{"a":1}', None, None),
    ("message", "", "5", 300),
    ("message", "x\ny", "5", None),
    ("endpoint", "/messages/?session_id=abc", "5", None),
]


def _collect(chunks: list[bytes]) -> list[tuple[str, str, str | None, int | None]]:
    parser = SSEParser()
    return [(e.event, e.data, e.id, e.retry) for chunk in chunks for e in parser.feed(chunk)]


def test_whole_stream_parses() -> None:
    assert _collect([STREAM]) == EXPECTED


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_any_split_point_gives_the_same_events(cut: int) -> None:
    assert _collect([STREAM[:cut], STREAM[cut:]]) == EXPECTED


def test_byte_by_byte_feeding_gives_the_same_events() -> None:
    assert _collect([bytes([b]) for b in STREAM]) == EXPECTED


def test_oversized_event_is_refused() -> None:
    parser = SSEParser(max_event_bytes=10)
    with pytest.raises(ValueError, match="size limit"):
        list(parser.feed(b"data: " + b"x" * 20 + b"\n"))
