"""Reading a request body: whole and bounded, whether it is already buffered or still arriving."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp import streams
from aiohttp.test_utils import make_mocked_request

from gateway.frontdoor.body import BodyTimeout, BodyTooLarge, read_body


def request_with(chunks: list[bytes], *, ended: bool, content_length: int | None = None) -> object:
    protocol = mock.Mock(_reading_paused=False)
    payload = streams.StreamReader(protocol, 2**16, loop=asyncio.get_running_loop())
    for chunk in chunks:
        payload.feed_data(chunk)
    if ended:
        payload.feed_eof()
    headers = {"Content-Length": str(content_length)} if content_length is not None else {}
    return make_mocked_request("POST", "/mcp", headers=headers, payload=payload, protocol=protocol)


async def test_a_body_already_buffered_whole_is_returned_as_sent() -> None:
    request = request_with([b'{"a":', b"1}"], ended=True, content_length=7)
    assert await read_body(request, limit=100, timeout=5) == b'{"a":1}'  # type: ignore[arg-type]


async def test_a_buffered_body_over_the_limit_without_a_length_is_refused() -> None:
    request = request_with([b"x" * 60, b"y" * 60], ended=True)
    with pytest.raises(BodyTooLarge):
        await read_body(request, limit=100, timeout=5)  # type: ignore[arg-type]


async def test_a_buffered_body_at_the_limit_is_accepted() -> None:
    request = request_with([b"x" * 100], ended=True)
    assert await read_body(request, limit=100, timeout=5) == b"x" * 100  # type: ignore[arg-type]


async def test_an_empty_ended_body_is_empty() -> None:
    request = request_with([], ended=True, content_length=0)
    assert await read_body(request, limit=100, timeout=5) == b""  # type: ignore[arg-type]


async def test_a_body_still_arriving_is_read_to_its_end() -> None:
    request = request_with([b"ab"], ended=False)

    async def rest() -> None:
        request.content.feed_data(b"cd")  # type: ignore[attr-defined]
        request.content.feed_eof()  # type: ignore[attr-defined]

    loop = asyncio.get_running_loop()
    loop.call_soon(lambda: asyncio.ensure_future(rest()))
    assert await read_body(request, limit=100, timeout=5) == b"abcd"  # type: ignore[arg-type]


async def test_a_body_that_never_ends_times_out() -> None:
    request = request_with([b"ab"], ended=False)
    with pytest.raises(BodyTimeout):
        await read_body(request, limit=100, timeout=0.05)  # type: ignore[arg-type]


async def test_a_body_already_buffered_whole_arms_no_timer() -> None:
    """Nothing is left to wait for, so the time bound is not even set up."""
    request = request_with([b"{}"], ended=True, content_length=2)
    with mock.patch("gateway.frontdoor.body.asyncio.timeout", side_effect=AssertionError("timer armed")):
        assert await read_body(request, limit=100, timeout=5) == b"{}"  # type: ignore[arg-type]
