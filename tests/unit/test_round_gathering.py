"""How :meth:`Exchange.poll` decides that an input round is complete (no clock is asserted: each
case either returns an event or ends the round, and would hang on the window if it did not)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from gateway.calls import route
from gateway.errors import BackendUnavailable
from gateway.legacy.session import Exchange, FinalResponse, ServerNotification, ServerRequest
from gateway.owned import TaskGroup

LONG_WINDOW = 3600.0
"""A window no test can sit out: a poll that waited for it would hit the test's timeout."""
BOUND = 10.0


async def never() -> None:
    """A ping that never comes back."""
    await asyncio.Event().wait()


async def wait_for(event: asyncio.Event) -> None:
    await event.wait()


def session_exchange() -> Exchange:
    """An exchange as a session makes it: its round fences run in a group (the session's)."""
    return Exchange(request_id=1, method="tools/call", fence_group=TaskGroup("test-session"))


def request(n: int) -> ServerRequest:
    return ServerRequest(n, "elicitation/create", {"message": str(n)})


def answered_pings(exchange: Exchange) -> list[None]:
    """Give ``exchange`` a ping that the backend answers at once; one item per ping sent."""
    pings: list[None] = []

    async def fence_ping() -> None:
        pings.append(None)

    exchange.fence_ping = fence_ping
    return pings


async def test_the_round_ends_once_the_backend_answered_a_ping_with_nothing_new() -> None:
    exchange = session_exchange()
    pings = answered_pings(exchange)
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) is None
    assert len(pings) == 1


async def test_a_request_sent_before_the_ping_answer_joins_the_round() -> None:
    """The server was descheduled between its two writes: the second arrives before its ping answer."""
    exchange = session_exchange()

    async def fence_ping() -> None:
        exchange.push(request(2))

    exchange.fence_ping = fence_ping
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) == request(2)


async def test_requests_already_received_are_taken_without_waiting() -> None:
    exchange = session_exchange()
    exchange.fence_ping = never
    exchange.push(request(1))
    exchange.push(request(2))
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) == request(1)
        assert await exchange.poll(LONG_WINDOW) == request(2)


async def test_a_half_received_message_is_awaited_before_the_ping() -> None:
    exchange = session_exchange()
    exchange.receiving = lambda: True
    exchange.fence_ping = never  # not reached: the message completes first
    loop = asyncio.get_running_loop()
    loop.call_later(0.01, exchange.push, request(3))
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) == request(3)


async def test_a_failed_ping_ends_the_round() -> None:
    exchange = session_exchange()

    async def fence_ping() -> None:
        raise BackendUnavailable("timeout", "no pong")

    exchange.fence_ping = fence_ping
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) is None


async def test_the_window_bounds_a_ping_that_never_comes_back() -> None:
    exchange = session_exchange()
    exchange.fence_ping = never
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(0.05) is None


async def test_one_ping_fences_every_request_that_arrives_while_it_is_out() -> None:
    """The ping leaves as soon as the round is gathered (no silence first) and is not sent again for
    requests that arrive while it is out; the next round sends its own."""
    exchange = session_exchange()
    pings = 0
    answer = asyncio.Event()

    async def fence_ping() -> None:
        nonlocal pings
        pings += 1
        await answer.wait()

    exchange.fence_ping = fence_ping
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(BOUND):
        loop.call_soon(exchange.push, request(2))
        assert await exchange.poll(LONG_WINDOW) == request(2)
        assert pings == 1  # sent before request 2 arrived
        loop.call_soon(exchange.push, request(3))
        assert await exchange.poll(LONG_WINDOW) == request(3)
        loop.call_soon(answer.set)
        assert await exchange.poll(LONG_WINDOW) is None
        assert pings == 1
        # the next round
        assert await exchange.poll(LONG_WINDOW) is None
        assert pings == 2


async def test_a_final_answer_while_the_ping_is_out_cancels_the_ping() -> None:
    exchange = session_exchange()
    cancelled = asyncio.Event()

    async def fence_ping() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    exchange.fence_ping = fence_ping
    final = FinalResponse(result={"content": []})
    asyncio.get_running_loop().call_soon(exchange.push, final)
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) == final
        await cancelled.wait()


async def test_closing_the_exchange_cancels_a_ping_that_is_out() -> None:
    exchange = session_exchange()
    exchange.fence_ping = never
    poll = asyncio.ensure_future(exchange.poll(LONG_WINDOW))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    fence = exchange._fence
    assert fence is not None
    poll.cancel()
    exchange.close_nowait()
    async with asyncio.timeout(BOUND):
        with contextlib.suppress(asyncio.CancelledError):
            await poll
        with contextlib.suppress(asyncio.CancelledError):
            await fence
    assert fence.cancelled()


async def test_a_backend_that_fails_the_ping_is_gathered_by_silence_around_a_ping() -> None:
    """No fence: silence, a ping whatever its outcome (its round trip is as slow as the backend),
    silence; a request arriving during that ping still joins the round."""
    exchange = session_exchange()
    pings = 0

    async def fence_ping() -> None:
        nonlocal pings
        pings += 1
        if pings == 2:
            exchange.push(request(7))
        raise BackendUnavailable("bad_status", "ping answered HTTP 500")

    exchange.fence_ping = fence_ping
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW) == request(7)
        assert pings == 2
        assert await exchange.poll(LONG_WINDOW) is None
        assert pings == 3


# -- unfenced rounds: what the bytes already received hold ----------------------------------


async def test_an_unfenced_round_is_what_has_arrived_and_sends_no_ping() -> None:
    """Requests that arrive within the loop turns that read the sockets join the round; then it is
    complete at once (a window no test can sit out is not waited for), and no ping was sent."""
    exchange = session_exchange()
    pings = answered_pings(exchange)
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(BOUND):
        loop.call_soon(exchange.push, request(1))
        assert await exchange.poll(LONG_WINDOW, fenced=False) == request(1)
        assert await exchange.poll(LONG_WINDOW, fenced=False) is None
    assert not pings


async def test_an_unfenced_round_waits_for_a_half_received_message() -> None:
    exchange = session_exchange()
    exchange.fence_ping = never
    exchange.receiving = lambda: True
    asyncio.get_running_loop().call_later(0.01, exchange.push, request(4))
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW, fenced=False) == request(4)


async def test_a_request_after_an_unfenced_round_is_the_next_round() -> None:
    exchange = session_exchange()
    async with asyncio.timeout(BOUND):
        assert await exchange.poll(LONG_WINDOW, fenced=False) is None
        exchange.push(request(5))
        assert await exchange.next(BOUND) == request(5)


async def test_a_window_of_zero_ends_every_round_at_once() -> None:
    exchange = session_exchange()
    exchange.fence_ping = never
    asyncio.get_running_loop().call_soon(exchange.push, request(6))
    assert await exchange.poll(0) is None
    assert exchange._fence is None  # no ping was sent


def test_a_request_queued_when_the_answers_leave_was_asked_together() -> None:
    """backend_turn says whether the backend sent a request before it could see the answers."""
    exchange = session_exchange()
    assert exchange.backend_turn() is False
    exchange.push(ServerNotification("notifications/progress", {"progress": 1}))
    assert exchange.backend_turn() is False
    exchange.push(request(8))
    assert exchange.backend_turn() is True


def test_a_request_is_fenced_until_its_backend_asks_one_question_at_a_time() -> None:
    fences = route.RoundFences()
    key = "tools/call a"
    for _ in range(route.UNFENCE_AFTER):
        assert fences.fenced(key)
        fences.gathered(key, 1)
    assert not fences.fenced(key)
    fences.gathered(key, 1)
    assert not fences.fenced(key)
    fences.together(key)  # an unfenced round came split
    assert fences.fenced(key)
    for _ in range(route.UNFENCE_AFTER + 1):
        fences.gathered(key, 1)
    assert fences.fenced(key)  # for good


def test_a_round_of_two_questions_fences_its_request_for_good() -> None:
    fences = route.RoundFences()
    fences.gathered("tools/call b", 2)
    for _ in range(route.UNFENCE_AFTER + 1):
        fences.gathered("tools/call b", 1)
    assert fences.fenced("tools/call b")


def test_requests_past_the_bound_stay_fenced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(route, "ROUND_FENCE_ENTRIES", 1)
    fences = route.RoundFences()
    for key in ("tools/call a", "tools/call b"):
        for _ in range(route.UNFENCE_AFTER):
            fences.gathered(key, 1)
    assert not fences.fenced("tools/call a")
    assert fences.fenced("tools/call b")  # no room for its record: the safe default
    assert len(fences.rounds) == 1
