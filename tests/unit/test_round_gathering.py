"""How :meth:`Exchange.poll` decides that an input round is complete (no clock is asserted: each
case either returns an event or ends the round, and would hang on the window if it did not)."""

from __future__ import annotations

import asyncio

from gateway.errors import BackendUnavailable
from gateway.legacy.session import Exchange, ServerRequest

LONG_WINDOW = 3600.0
"""A window no test can sit out: a poll that waited for it would hit the test's timeout."""
BOUND = 10.0


async def never() -> None:
    """A ping that never comes back."""
    await asyncio.Event().wait()


def request(n: int) -> ServerRequest:
    return ServerRequest(n, "elicitation/create", {"message": str(n)})


async def test_the_round_ends_once_the_backend_answered_a_ping_with_nothing_new() -> None:
    exchange = Exchange(request_id=1, method="tools/call")
    pings = 0

    async def settle() -> None:
        nonlocal pings
        pings += 1

    exchange.settle = settle
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) is None
    assert pings == 1


async def test_a_request_sent_before_the_ping_answer_joins_the_round() -> None:
    """The server was descheduled between its two writes: the second arrives before its ping answer."""
    exchange = Exchange(request_id=1, method="tools/call")

    async def settle() -> None:
        exchange.push(request(2))

    exchange.settle = settle
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) == request(2)


async def test_requests_already_received_are_taken_without_waiting() -> None:
    exchange = Exchange(request_id=1, method="tools/call")
    exchange.settle = never
    exchange.push(request(1))
    exchange.push(request(2))
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) == request(1)
        assert await exchange.poll(LONG_WINDOW) == request(2)


async def test_a_half_received_message_is_awaited_before_the_ping() -> None:
    exchange = Exchange(request_id=1, method="tools/call")
    exchange.receiving = lambda: True
    exchange.settle = never  # not reached: the message completes first
    loop = asyncio.get_running_loop()
    loop.call_later(0.01, exchange.push, request(3))
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) == request(3)


async def test_a_failed_ping_ends_the_round() -> None:
    exchange = Exchange(request_id=1, method="tools/call")

    async def settle() -> None:
        raise BackendUnavailable("timeout", "no pong")

    exchange.settle = settle
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) is None


async def test_the_window_bounds_a_ping_that_never_comes_back() -> None:
    exchange = Exchange(request_id=1, method="tools/call")
    exchange.settle = never
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(0.05) is None
