"""The backend SSE parser, fed byte streams split at every position."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.legacy.sse import SSEEvent, SSELimitError, SSEParser
from gateway.legacy.wire import SSE_SLICE_BYTES, SSE_SLICE_LINES, sse_events, sse_pieces

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


# --- the parser against a reference: the earlier per-line implementation -------------------------

_REFERENCE_LINE_END = re.compile(rb"\r\n|\r|\n")


class _ReferenceParser:
    """The parser as it was before it found line ends with ``bytes.find`` and kept data undecoded:
    a regular expression per chunk, each line decoded on its own. Slow (about 50 ms per 4 MiB),
    but plainly right; the fast parser must give the same events and the same refusals."""

    def __init__(self, max_event_bytes: int) -> None:
        self._partial: list[bytes] = []
        self._partial_len = 0
        self._skip_lf = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None
        self._since_event = 0
        self._max = max_event_bytes

    def feed(self, chunk: bytes) -> Iterator[SSEEvent]:
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
        start = 0
        for match in _REFERENCE_LINE_END.finditer(chunk):
            end = match.start()
            self._partial.append(chunk[start:end])
            line = b"".join(self._partial)
            self._partial, self._partial_len = [], 0
            start = match.end()
            self._since_event += len(line) + (start - end)
            if self._since_event > self._max:
                raise SSELimitError("SSE event exceeds the size limit")
            event = self._line(line)
            if event is not None:
                yield event
        if chunk.endswith(b"\r"):
            self._skip_lf = True
        if start < len(chunk):
            self._partial.append(chunk[start:])
            self._partial_len += len(chunk) - start
            if self._since_event + self._partial_len > self._max:
                raise SSELimitError("SSE line exceeds the size limit")

    @property
    def buffered(self) -> int:
        return self._since_event + self._partial_len

    def _line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            if not self._data and not self._event:
                self._event, self._data, self._retry = "", [], None
                return None
            event = SSEEvent(self._event or "message", "\n".join(self._data), self._id, self._retry)
            self._event, self._data, self._retry = "", [], None
            self._since_event = 0
            return event
        if raw[0] == 0x3A:
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


def _run(parser: Any, chunks: list[bytes]) -> tuple[list[Any], str | None, list[int]]:
    """Events, the refusal (type and message) if any, and what was buffered after each chunk."""
    events: list[Any] = []
    buffered: list[int] = []
    try:
        for chunk in chunks:
            events.extend((e.event, e.data, e.id, e.retry) for e in parser.feed(chunk))
            buffered.append(parser.buffered)
    except ValueError as exc:
        return events, f"{type(exc).__name__}: {exc}", buffered
    return events, None, buffered


_TOKENS = [
    b"data",
    b"data:",
    b"data: ",
    b"event: ",
    b"id: ",
    b"retry: ",
    b":",
    b" ",
    b"\r",
    b"\n",
    b"\r\n",
    b"x",
    b"message",
    b"7",
    b"\x00",
    b"\xc3",
    b"\xa9",
    b"\xe2\x82",
    b"\xff",
    "é".encode(),
    "²".encode(),  # a digit to str.isdigit, not to int()
    "٣".encode(),  # an Arabic-Indic three: both
]


@settings(max_examples=400, deadline=None)
@given(
    tokens=st.lists(st.sampled_from(_TOKENS), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    limit=st.sampled_from([6, 16, 40, 1 << 20]),
)
def test_the_parser_matches_the_reference_however_the_stream_is_cut(
    tokens: list[bytes], cuts: list[int], limit: int
) -> None:
    stream = b"".join(tokens)
    points = sorted({min(c, len(stream)) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert _run(SSEParser(limit), chunks) == _run(_ReferenceParser(limit), chunks)


def test_invalid_utf8_in_data_lines_is_replaced_as_when_each_line_was_decoded() -> None:
    stream = b"data: caf\xc3\ndata: \xa9\xffok\r\ndata: \xe2\x82\r\n\r\n"
    assert _collect([stream]) == [("message", "caf\ufffd\n\ufffd\ufffdok\n\ufffd", None, None)]
    single = b"event: \xffe\ndata: \xe2\x82 x\xc3\n\n"
    assert _collect([single]) == [("\ufffde", "\ufffd x\ufffd", None, None)]
    for one in (stream, single):
        assert _run(SSEParser(1 << 20), [one]) == _run(_ReferenceParser(1 << 20), [one])


# --- large events: every way of cutting them ------------------------------------------------------


def _large_stream(payload: bytes, newline: bytes) -> bytes:
    return b"event: message" + newline + b"data: " + payload + newline + b"id: 9" + newline + newline


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize("size", [1, 7, 4096, 65535, 65536, 262144 + 3])
def test_a_large_event_cut_into_chunks_of_any_size_parses_the_same(newline: bytes, size: int) -> None:
    payload = bytes(range(32, 127)) * (1024 * 1024 // 95)  # ~1 MiB of printable ASCII
    stream = _large_stream(payload, newline)
    parser = SSEParser()
    events = [e for offset in range(0, len(stream), size) for e in parser.feed(stream[offset : offset + size])]
    assert [(e.event, e.data, e.id) for e in events] == [("message", payload.decode(), "9")]
    assert parser.buffered == 0
    assert not parser.mid_event()


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["LF", "CRLF"])
def test_a_large_event_cut_at_every_boundary_near_its_line_ends(newline: bytes) -> None:
    """Each cut point around the line ends (CR and LF of one CRLF in different chunks included) and
    around the field names, with a 256 KiB line between them."""
    payload = "é".encode() * (128 * 1024)
    stream = _large_stream(payload, newline)
    expected = [("message", payload.decode(), "9")]
    data_end = stream.index(payload) + len(payload)
    interesting = [*range(0, 30), *range(data_end - 8, len(stream) + 1)]
    for cut in interesting:
        for second in (cut, min(cut + 1, len(stream)), min(cut + 2, len(stream))):
            chunks = [stream[:cut], stream[cut:second], stream[second:]]
            assert _collect(chunks) == [(*expected[0], None)], (cut, second)


def test_a_multibyte_character_cut_between_chunks_is_decoded_whole() -> None:
    payload = "é€😀".encode() * 1000
    stream = b"data: " + payload + b"\n\n"
    for cut in range(6, 18):
        assert _collect([stream[:cut], stream[cut:]]) == [("message", payload.decode(), None, None)]


def test_an_event_of_exactly_the_limit_passes_and_one_byte_more_is_refused() -> None:
    payload = b"z" * 100_000
    stream = b"data: " + payload + b"\r\n\r\n"
    exact = SSEParser(max_event_bytes=len(stream))
    assert [e.data for c in range(0, len(stream), 4096) for e in exact.feed(stream[c : c + 4096])] == [payload.decode()]
    over = SSEParser(max_event_bytes=len(stream) - 1)
    with pytest.raises(SSELimitError):
        _feed_until_refused(over, [stream[c : c + 4096] for c in range(0, len(stream), 4096)])


def test_a_large_line_split_in_chunks_is_joined_once_and_kept_as_its_pieces() -> None:
    """A chunk with no line end is kept as it is (no copy per chunk)."""
    parser = SSEParser()
    chunk = b"x" * 65536
    assert list(parser.feed(b"data: ")) == []
    assert list(parser.feed(chunk)) == []
    assert parser._partial[-1] is chunk
    assert [len(e.data) for e in parser.feed(b"\n\n")] == [65536]


# --- sse_pieces: how chunks are cut before the parser sees them ----------------------------------


def test_a_chunk_with_few_line_ends_is_parsed_whole() -> None:
    chunk = b"data: " + b"x" * 1_000_000 + b"\n\n"
    assert [piece is chunk for piece in sse_pieces(chunk)] == [True]


def test_a_chunk_with_many_line_ends_is_cut_in_slices() -> None:
    chunk = b": c\r" * 5000
    pieces = list(sse_pieces(chunk))
    assert b"".join(pieces) == chunk
    assert max(len(p) for p in pieces) == SSE_SLICE_BYTES
    lines = b"\n" * (SSE_SLICE_LINES + 1)
    assert len(list(sse_pieces(lines + b"x" * SSE_SLICE_BYTES))) > 1
    assert list(sse_pieces(lines[1:])) == [lines[1:]]
