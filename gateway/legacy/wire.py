"""The backend wire, transport by transport alike: foreign failures, JSON-RPC bodies, SSE events.

Foreign failures (HTTP client errors, timeouts, bad bodies) are translated to
:class:`~gateway.errors.BackendUnavailable` in :class:`backend_errors`: the client's own through
:mod:`gateway.http_errors`, the one reader of aiohttp's exception tree. :func:`decode_json` is
the only decoder of a backend's JSON (UTF-8 only,
nesting bounded by :data:`MAX_NESTING`); :func:`jsonrpc_messages` and :func:`final_response` are
the only readers of a backend's JSON-RPC envelope; :func:`sse_events` and :func:`read_bounded` the
only readers of a backend HTTP body, both bounded in bytes and in how long they hold the event loop.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import Any, Final

import aiohttp

from gateway.errors import BackendUnavailable
from gateway.http_errors import CLIENT_FAILURES, backend_unavailable
from gateway.legacy.session import FinalResponse, JsonObj, SessionExpired
from gateway.legacy.sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent, SSEParser
from gateway.turns import LOOP_HOLD_SECONDS, give_turn


class backend_errors:  # lower case: used as ``with backend_errors(what):``, like contextlib's helpers
    """Map every foreign failure while talking to the backend onto BackendUnavailable.

    A class rather than a generator-based context manager: it wraps every backend request and
    every read of a call's stream, and costs one small object instead of a generator."""

    __slots__ = ("_what",)

    def __init__(self, what: str) -> None:
        self._what = what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or isinstance(exc, BackendUnavailable | SessionExpired):
            return
        what = self._what
        if isinstance(exc, CLIENT_FAILURES):
            raise backend_unavailable(exc, what) from exc
        if isinstance(exc, ValueError | RecursionError):  # incl. JSONDecodeError, UnicodeDecodeError
            raise BackendUnavailable("malformed_response", f"{what}: {exc}") from exc


_JITTER = random.Random()  # noqa: S311 - jitter, not a secret
"""A generator of its own: the global one is left alone (property-based tests watch it while they draw)."""


def jittered(seconds: float) -> float:
    """``seconds`` spread over [50 %, 100 %], so sessions dropped together do not come back together."""
    return seconds * (0.5 + _JITTER.random() / 2)


MAX_NESTING: Final = 512
"""Deepest nesting of arrays and objects accepted in one backend message, counted from the message
itself (its envelope is 1, ``result`` 2): deeper is ``malformed_response``. Far beyond any real
result, and shallow enough that nothing which later walks a message (translating, encoding it)
comes near Python's recursion limit, whatever the stack it runs on."""


def decode_json(raw: str | bytes) -> Any:
    """The one decoder of a backend's JSON: ``raw`` (bytes: UTF-8, a leading BOM ignored) decoded,
    or ``ValueError`` (not JSON, not UTF-8), or ``BackendUnavailable("malformed_response")`` when it
    nests deeper than :data:`MAX_NESTING` - a failure of the message, not a line to skip (stdio).

    The bound is checked by one iterative walk of the decoded arrays and objects only: about nothing
    for a text result, at most the parse's own cost for a message of many small objects. Nesting the
    decoder itself cannot follow (thousands deep) stops it at once (``RecursionError``)."""
    text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw
    try:
        value = json.loads(text)
    except RecursionError:
        raise BackendUnavailable("malformed_response", f"a message nested deeper than {MAX_NESTING}") from None
    if _nests_deeper(value, MAX_NESTING):
        raise BackendUnavailable("malformed_response", f"a message nested deeper than {MAX_NESTING}")
    return value


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays/objects deeper than ``limit`` (iterative: no recursion)."""
    if type(value) is not dict and type(value) is not list:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    push, pop = stack.append, stack.pop
    while stack:
        node, depth = pop()
        for child in node.values() if type(node) is dict else node:
            if type(child) is dict or type(child) is list:
                if depth >= limit:
                    return True
                push((child, depth + 1))
    return False


def jsonrpc_messages(payload: Any) -> list[JsonObj]:
    """Backend bodies are one JSON-RPC message or (2025-03-26) a batch of them."""
    items = payload if isinstance(payload, list) else [payload]
    out = [m for m in items if isinstance(m, dict) and m.get("jsonrpc") == "2.0"]
    if len(out) != len(items) or not out:
        raise ValueError("not a JSON-RPC message")
    return out


def final_response(message: JsonObj) -> FinalResponse:
    if "error" in message:
        error = message["error"]
        if not isinstance(error, dict):
            raise ValueError("malformed JSON-RPC error")
        return FinalResponse(error=error)
    result = message.get("result")
    if not isinstance(result, dict):
        raise ValueError("malformed JSON-RPC result")
    return FinalResponse(result=result)


SSE_SLICE_BYTES = 4 * 1024
"""A chunk with many line ends is parsed in slices of this many bytes, the loop's hold checked between."""
SSE_SLICE_LINES = 64
"""A chunk with at most this many line ends is parsed whole: its cost is in its bytes, which the
parser scans at C speed (``memchr``), not in per-line work; slicing it would only add copies."""


def sse_pieces(chunk: bytes) -> Iterator[bytes]:
    """``chunk`` whole when it holds few line ends (a large event), else in :data:`SSE_SLICE_BYTES` slices.

    What bounds one parser call is the number of lines in it (each costs Python work), so a chunk
    of tiny lines is cut small, while a slice of one long line costs only a copy and is not cut.
    """
    if _few_line_ends(chunk, b"\n") and _few_line_ends(chunk, b"\r"):
        yield chunk
        return
    for offset in range(0, len(chunk), SSE_SLICE_BYTES):
        yield chunk[offset : offset + SSE_SLICE_BYTES]


def _few_line_ends(chunk: bytes, end: bytes) -> bool:
    """At most :data:`SSE_SLICE_LINES` ``end`` bytes in ``chunk``, found with ``find`` (``memchr``,
    where ``count`` compares byte by byte), stopping at the first one past the bound."""
    at = -1
    for _ in range(SSE_SLICE_LINES + 1):
        at = chunk.find(end, at + 1)
        if at < 0:
            return True
    return False


async def sse_events(
    resp: aiohttp.ClientResponse,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    idle_timeout: float | None = None,
    parser: SSEParser | None = None,
) -> AsyncIterator[SSEEvent]:
    """The events of one backend SSE response, without ever holding the event loop for long.

    Chunks are parsed in pieces (:func:`sse_pieces`); once parsing has held the loop for
    :data:`~gateway.turns.LOOP_HOLD_SECONDS` it hands the loop over (:func:`~gateway.turns.give_turn`),
    so a flood of tiny lines or one huge event costs other requests a few milliseconds at most.
    ``idle_timeout`` bounds the silence between two reads (``TimeoutError``); the parser bounds the
    bytes between two events (:class:`~gateway.legacy.sse.SSELimitError`). A caller may pass its own
    ``parser`` to see how much of an unfinished event has arrived (``buffered``).
    """
    parser = parser or SSEParser(max_event_bytes)
    loop = asyncio.get_running_loop()
    while True:
        if idle_timeout is None:
            chunk = await resp.content.readany()
        else:
            async with asyncio.timeout(idle_timeout):
                chunk = await resp.content.readany()
        if not chunk:
            return
        # Bytes reach the reader only while the loop runs other callbacks, and ``readany`` takes all
        # of them: a read either waited (the loop was free) or came right after a turn given below.
        held_since = loop.time()
        for piece in sse_pieces(chunk):
            for event in parser.feed(piece):
                if loop.time() - held_since > LOOP_HOLD_SECONDS:
                    # completing a large event (joining and decoding it) was one step; what the
                    # caller does with it (parsing its JSON) is the next, with the loop's turn between
                    await give_turn()
                    held_since = loop.time()
                yield event
            if loop.time() - held_since > LOOP_HOLD_SECONDS:
                await give_turn()
                held_since = loop.time()


async def parse_messages(raw: str | bytes) -> list[JsonObj]:
    """The JSON-RPC messages of one backend message (:func:`decode_json`, then :func:`jsonrpc_messages`).

    Parsing a large message is one step nothing can split (4 MiB: about 5 ms here). When it has
    held the event loop past :data:`~gateway.turns.LOOP_HOLD_SECONDS`, the loop gets a turn before
    the messages are routed, so the work their routing sets off (the answer's translation, encoding
    and writing) is a step of its own and other requests are served between the two.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    messages = jsonrpc_messages(decode_json(raw))
    if loop.time() - started > LOOP_HOLD_SECONDS:
        await give_turn()
    return messages


def message_size(raw: str | bytes, count: int) -> int:
    """Wire bytes charged to each of ``count`` messages decoded from ``raw`` (a batch shares them)."""
    return len(raw) // max(count, 1) + 1


END_SECONDS = 0.5
"""Seconds the end of an answered stream may take to arrive before its connection is closed."""


def release_at_end(resp: aiohttp.ClientResponse, ending: set[aiohttp.ClientResponse]) -> None:
    """Give up a response whose answer has been read, keeping its connection for the next request.

    What is left of it (the end of an SSE stream, most often already received) is not read: aiohttp
    hands the connection back to its pool when the end arrives, unread bytes or not. A stream whose
    end has not come within :data:`END_SECONDS` is released then, and its connection closed; what it
    sends meanwhile is bounded by aiohttp's flow control (its reading pauses at twice the stream's
    64 KiB limit). No task waits for it: one timer, cancelled by the end. Until then the response is
    in ``ending``, its session's, which releases what is still there when it closes.
    """
    if resp.closed:
        return  # its end has arrived already (or it was released)
    ending.add(resp)

    def ended() -> None:
        timer.cancel()
        ending.discard(resp)

    def give_up() -> None:
        ending.discard(resp)
        resp.release()

    timer = asyncio.get_running_loop().call_later(END_SECONDS, give_up)
    resp.content.on_eof(ended)


async def read_bounded(content: aiohttp.StreamReader, limit: int, *, what: str) -> bytes:
    """Every byte of a body up to ``limit`` (``readany`` until EOF; a single ``read(n)`` returns
    only what happens to be buffered)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await content.readany():
        size += len(chunk)
        if size > limit:
            raise BackendUnavailable("malformed_response", f"{what}: response over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
