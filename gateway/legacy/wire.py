"""The backend wire, transport by transport alike: foreign failures, JSON-RPC bodies, SSE events.

Foreign failures (aiohttp errors, timeouts, bad bodies) are translated to
:class:`~gateway.errors.BackendUnavailable` in :func:`backend_errors`, the only place that knows
aiohttp's exception tree. :func:`jsonrpc_messages` and :func:`final_response` are the only
readers of a backend's JSON-RPC envelope; :func:`sse_events` and :func:`read_bounded` the only
readers of a backend HTTP body, both bounded in bytes and in how long they hold the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp

from gateway.errors import BackendUnavailable
from gateway.legacy.session import FinalResponse, JsonObj, SessionExpired
from gateway.legacy.sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent, SSEParser


@contextlib.contextmanager
def backend_errors(what: str) -> Iterator[None]:
    """Map every foreign failure while talking to the backend onto BackendUnavailable."""
    try:
        yield
    except BackendUnavailable:
        raise
    except SessionExpired:
        raise
    except aiohttp.ClientConnectorError as exc:
        raise BackendUnavailable("connect_failed", f"{what}: {exc.os_error or exc}") from exc
    except (aiohttp.ServerTimeoutError, TimeoutError) as exc:
        raise BackendUnavailable("timeout", f"{what}: timed out") from exc
    except aiohttp.ClientPayloadError as exc:
        raise BackendUnavailable("stream_broken", f"{what}: {exc}") from exc
    except aiohttp.ClientError as exc:
        raise BackendUnavailable("transport_error", f"{what}: {type(exc).__name__}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise BackendUnavailable("malformed_response", f"{what}: {exc}") from exc


def jittered(seconds: float) -> float:
    """``seconds`` spread over [50 %, 100 %], so sessions dropped together do not come back together."""
    return seconds * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not a secret


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
"""Bytes parsed between two checks of how long the event loop has been held."""
LOOP_HOLD_SECONDS = 0.002
"""Parsing yields to the event loop once it has held it this long (one slice may overshoot)."""


async def sse_events(
    resp: aiohttp.ClientResponse,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    idle_timeout: float | None = None,
    parser: SSEParser | None = None,
) -> AsyncIterator[SSEEvent]:
    """The events of one backend SSE response, without ever holding the event loop for long.

    Chunks are parsed in slices of :data:`SSE_SLICE_BYTES`; once parsing has held the loop for
    :data:`LOOP_HOLD_SECONDS` it yields (``sleep(0)``), so a flood of tiny lines or one huge event
    costs other requests a few milliseconds at most. ``idle_timeout`` bounds the silence between
    two reads (``TimeoutError``); the parser bounds the bytes between two events
    (:class:`~gateway.legacy.sse.SSELimitError`). A caller may pass its own ``parser`` to see how
    much of an unfinished event has arrived (``buffered``).
    """
    parser = parser or SSEParser(max_event_bytes)
    loop = asyncio.get_running_loop()
    held_since = loop.time()
    while True:
        if idle_timeout is None:
            chunk = await resp.content.readany()
        else:
            async with asyncio.timeout(idle_timeout):
                chunk = await resp.content.readany()
        if not chunk:
            return
        for offset in range(0, len(chunk), SSE_SLICE_BYTES):
            for event in parser.feed(chunk[offset : offset + SSE_SLICE_BYTES]):
                yield event
            if loop.time() - held_since > LOOP_HOLD_SECONDS:
                await asyncio.sleep(0)
                held_since = loop.time()


def message_size(raw: str | bytes, count: int) -> int:
    """Wire bytes charged to each of ``count`` messages decoded from ``raw`` (a batch shares them)."""
    return len(raw) // max(count, 1) + 1


DRAIN_BYTES = 64 * 1024
DRAIN_SECONDS = 0.5


async def drain(resp: aiohttp.ClientResponse) -> None:
    """Read what is left of a response whose answer has been read (the end of an SSE stream), so
    that releasing it returns the connection to the pool instead of closing it. Bounded in bytes
    and time: a stream that goes on is released (and its connection closed) as before."""
    left = DRAIN_BYTES
    with contextlib.suppress(TimeoutError, aiohttp.ClientError, ValueError):
        async with asyncio.timeout(DRAIN_SECONDS):
            while left > 0 and (chunk := await resp.content.readany()):
                left -= len(chunk)


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
