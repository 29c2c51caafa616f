"""The backend SSE parser, fed byte streams split at every position."""

from __future__ import annotations

import asyncio

import pytest

from gateway.legacy.sse import SSELimitError, SSEParser
from gateway.legacy.wire import sse_events

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


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    parser = SSEParser()
    events = list(parser.feed(b"data: a\r")) + list(parser.feed(b"\ndata: b\r")) + list(parser.feed(b"\n\r\n"))
    assert [(e.data) for e in events] == ["a\nb"]


def test_a_large_event_in_many_chunks_is_joined_once() -> None:
    payload = b"y" * (4 * 1024 * 1024)
    stream = b"data: " + payload + b"\n\n"
    parser = SSEParser()
    events = [e for offset in range(0, len(stream), 65536) for e in parser.feed(stream[offset : offset + 65536])]
    assert [len(e.data) for e in events] == [len(payload)]
    assert parser.buffered == 0


def test_an_endless_line_is_refused_once_over_the_limit_and_never_buffers_more() -> None:
    limit = 1024 * 1024
    parser = SSEParser(max_event_bytes=limit)
    chunk = b"x" * 65536
    with pytest.raises(SSELimitError):
        _feed_until_refused(parser, [chunk] * 10_000)  # 640 MiB if nothing stopped it
    assert parser.buffered <= limit + len(chunk)


def _feed_until_refused(parser: SSEParser, chunks: list[bytes]) -> int:
    for chunk in chunks:
        list(parser.feed(chunk))
        assert parser.buffered <= parser._max
    return len(chunks)


def test_a_comment_flood_counts_against_the_event_budget() -> None:
    parser = SSEParser(max_event_bytes=64 * 1024)
    with pytest.raises(SSELimitError):
        _feed_until_refused(parser, [b": keep-alive\n\n" * 100] * 100_000)


def test_keepalive_comments_between_events_do_not_accumulate_past_an_event() -> None:
    parser = SSEParser(max_event_bytes=1024)
    for _ in range(1000):  # 1000 events, each preceded by a comment: never over the budget
        assert [e.data for e in parser.feed(b": ping\n\ndata: ok\n\n")] == ["ok"]


class _Content:
    """Just enough of aiohttp's StreamReader for sse_events: one chunk, then end of stream."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def readany(self) -> bytes:
        return self._chunks.pop(0) if self._chunks else b""


class _Response:
    def __init__(self, chunks: list[bytes]) -> None:
        self.content = _Content(chunks)


async def test_parsing_a_huge_chunk_yields_to_the_event_loop() -> None:
    """Millions of tiny lines in one chunk are parsed in slices, letting other tasks run between."""
    chunk = b": c\n" * (1024 * 1024) + b"data: end\n\n"  # 4 MiB of comments, then one event
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = ticks
    events = [e async for e in sse_events(_Response([chunk]), max_event_bytes=len(chunk) + 1)]  # type: ignore[arg-type]
    done.set()
    await task
    assert [e.data for e in events] == ["end"]
    assert ticks - start >= 2


async def test_an_idle_stream_times_out() -> None:
    class Silent:
        async def readany(self) -> bytes:
            await asyncio.Event().wait()
            return b""

    response = _Response([])
    response.content = Silent()  # type: ignore[assignment]
    bound = asyncio.timeout(5)

    async def drain() -> None:
        async with bound:
            async for _ in sse_events(response, idle_timeout=0.05):  # type: ignore[arg-type]
                pass

    with pytest.raises(TimeoutError):
        await drain()
    assert not bound.expired()  # the idle timeout fired, not the test's bound
