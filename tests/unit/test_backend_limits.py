"""The bounds on what a backend may queue for one call and send in one round (BoundedExchange)."""

from __future__ import annotations

import pytest

from gateway.config.model import BackendLimitsConfig
from gateway.errors import BackendUnavailable
from gateway.legacy.limits import FLOOD_REASON, BackendLimits, BoundedExchange
from gateway.legacy.session import FinalResponse, ServerNotification, ServerRequest

WAIT = 5.0


def exchange(flooded: list[str] | None = None, **limits: int) -> BoundedExchange:
    sink = flooded if flooded is not None else []
    return BoundedExchange(request_id=1, method="tools/call", limits=BackendLimits(**limits), on_flood=sink.append)


def request(index: int) -> ServerRequest:
    return ServerRequest(f"s{index}", "elicitation/create", {"message": "?"})


def test_config_defaults_are_the_sessions_defaults() -> None:
    assert BackendLimits(**BackendLimitsConfig().model_dump()) == BackendLimits()


async def test_a_round_past_its_request_cap_fails_the_exchange_and_tells_the_session() -> None:
    flooded: list[str] = []
    ex = exchange(flooded, max_round_requests=3)
    for index in range(10):
        ex.push_sized(request(index), 100)
    assert await ex.next(WAIT) == request(0)
    assert await ex.poll(WAIT) == request(1)
    assert await ex.poll(WAIT) == request(2)
    with pytest.raises(BackendUnavailable) as caught:
        await ex.poll(WAIT)
    assert caught.value.reason == FLOOD_REASON
    assert len(flooded) == 1
    assert "server requests in one round" in flooded[0]
    assert ex.queue.empty()  # what was queued is dropped at once
    ex.push_sized(request(11), 100)  # the exchange is over: nothing more is kept
    assert ex.queue.empty()


async def test_each_round_starts_its_counts_again() -> None:
    ex = exchange(max_round_requests=2)
    for index in range(6):
        ex.push_sized(request(index), 10)
    for first in (0, 2, 4):  # three rounds of two: next() starts a round, poll() gathers it
        assert await ex.next(WAIT) == request(first)
        assert await ex.poll(WAIT) == request(first + 1)


async def test_notifications_count_toward_the_round_messages_and_bytes() -> None:
    ex = exchange(max_round_messages=5)
    ex.push_sized(request(0), 10)
    for _ in range(10):
        ex.push_sized(ServerNotification("notifications/progress", {}), 10)
    await ex.next(WAIT)
    for _ in range(4):
        await ex.poll(WAIT)
    with pytest.raises(BackendUnavailable):
        await ex.poll(WAIT)
    big = exchange(max_round_bytes=2048)
    big.push_sized(request(0), 1000)
    big.push_sized(ServerNotification("notifications/message", {}), 1000)
    big.push_sized(request(1), 1000)
    await big.next(WAIT)
    await big.poll(WAIT)
    with pytest.raises(BackendUnavailable):
        await big.poll(WAIT)


async def test_an_unread_queue_is_bounded_in_messages_and_bytes() -> None:
    flooded: list[str] = []
    ex = exchange(flooded, max_queued_messages=100)
    for _ in range(100_000):  # a held call nobody reads while the backend floods it
        ex.push_sized(ServerNotification("notifications/message", {"data": "x"}), 50)
        assert ex.queue.qsize() <= 100
    assert len(flooded) == 1
    with pytest.raises(BackendUnavailable):
        await ex.next(WAIT)
    by_bytes = exchange(max_queued_bytes=10_000)
    for _ in range(1000):
        by_bytes.push_sized(ServerNotification("notifications/message", {}), 1000)
    assert by_bytes.queue.qsize() == 1  # only the failure is left
    with pytest.raises(BackendUnavailable):
        await by_bytes.next(WAIT)


async def test_the_final_response_is_never_refused_by_the_queue_bounds() -> None:
    flooded: list[str] = []
    ex = exchange(flooded, max_queued_messages=2)
    ex.push_sized(ServerNotification("notifications/progress", {}), 10)
    ex.push_sized(ServerNotification("notifications/progress", {}), 10)
    ex.push_sized(FinalResponse(result={"content": []}), 10_000_000)
    assert not flooded
    await ex.next(WAIT)
    await ex.next(WAIT)
    assert isinstance(await ex.next(WAIT), FinalResponse)
