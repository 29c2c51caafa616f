"""Session pool: exclusive leases for interactive calls, shared leases for plain ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from fake_backend import FakeBackend
from waiting import eventually

from gateway.config.model import RouteConfig
from gateway.errors import Overloaded
from gateway.legacy.pool import SessionPool

Backend = tuple[FakeBackend, str]
CAPS: dict[str, Any] = {"elicitation": {"form": {}}}


@asynccontextmanager
async def pool_of(url: str, **backend: Any) -> AsyncIterator[SessionPool]:
    async with aiohttp.ClientSession() as http:
        route = RouteConfig.model_validate({"name": "r", "path": "/mcp", "backend": {"url": url, **backend}})
        pool = SessionPool(http, route)
        try:
            yield pool
        finally:
            await pool.close()


@pytest.fixture
async def pool(fake_backend: Backend) -> AsyncIterator[SessionPool]:
    _, url = fake_backend
    async with pool_of(url, max_sessions=2) as pool:
        yield pool


async def test_plain_calls_share_a_session_interactive_calls_do_not(pool: SessionPool) -> None:
    key = pool.key_for(None, CAPS)
    first = await pool.lease(key, CAPS, {}, exclusive=False)
    second = await pool.lease(key, CAPS, {}, exclusive=False)
    assert first is second
    assert first.shared == 2
    interactive = await pool.lease(key, CAPS, {}, exclusive=True)
    assert interactive is first, "a session used only by plain calls can be taken by one interactive call"
    another = await pool.lease(key, CAPS, {}, exclusive=True)
    assert another is not first
    assert pool.initializations == 2
    for _ in range(2):
        pool.release(first, exclusive=False)
    pool.release(first)
    pool.release(another)
    assert (pool.leased_count, pool.idle_count) == (0, 2)


async def test_the_bound_refuses_an_interactive_call_when_every_session_is_held(fake_backend: Backend) -> None:
    """With ``session_wait: 0`` the refusal comes at once (the default waits first: see below)."""
    async with pool_of(fake_backend[1], max_sessions=2, session_wait=0) as pool:
        key = pool.key_for(None, CAPS)
        held = [await pool.lease(key, CAPS, {}, exclusive=True) for _ in range(2)]
        with pytest.raises(Overloaded):
            await pool.lease(key, CAPS, {}, exclusive=True)
        plain = await pool.lease(key, CAPS, {}, exclusive=False)
        assert plain in held, "a plain call rides on a held session instead of being refused"
        pool.release(plain, exclusive=False)
        pool.release(held[0])
        assert await pool.lease(key, CAPS, {}, exclusive=True) is held[0]


async def test_calls_at_the_bound_wait_for_released_sessions_in_arrival_order(pool: SessionPool) -> None:
    key = pool.key_for(None, CAPS)
    held = [await pool.lease(key, CAPS, {}, exclusive=True) for _ in range(2)]
    first = asyncio.create_task(pool.lease(key, CAPS, {}, exclusive=True))
    await eventually(lambda: pool.waiting_count == 1, what="one lease waiting", interval=0)
    second = asyncio.create_task(pool.lease(key, CAPS, {}, exclusive=True))
    await eventually(lambda: pool.waiting_count == 2, what="two leases waiting", interval=0)
    pool.release(held[1])
    assert await asyncio.wait_for(first, 5) is held[1], "the first in line gets the first released session"
    assert not second.done()
    pool.release(held[0])
    assert await asyncio.wait_for(second, 5) is held[0]
    assert (pool.initializations, pool.waiting_count) == (2, 0)


async def test_a_waiting_call_is_refused_once_session_wait_has_passed(fake_backend: Backend) -> None:
    async with pool_of(fake_backend[1], max_sessions=1, session_wait=0.05) as pool:
        key = pool.key_for(None, CAPS)
        held = await pool.lease(key, CAPS, {}, exclusive=True)
        with pytest.raises(Overloaded) as refused:
            await pool.lease(key, CAPS, {}, exclusive=True)
        assert (refused.value.reason, refused.value.retry_after) == ("backend_sessions_exhausted", 1)
        assert pool.waiting_count == 0, "a refused call leaves the line"
        pool.release(held)
        assert await pool.lease(key, CAPS, {}, exclusive=True) is held


async def test_a_waiting_call_takes_the_place_of_an_evicted_idle_session_of_another_key(pool: SessionPool) -> None:
    mine, other = pool.key_for("Bearer a", CAPS), pool.key_for("Bearer b", CAPS)
    held = await pool.lease(mine, CAPS, {}, exclusive=True)
    theirs = await pool.lease(other, CAPS, {}, exclusive=True)
    waiting = asyncio.create_task(pool.lease(mine, CAPS, {}, exclusive=True))
    await eventually(lambda: pool.waiting_count == 1, what="one lease waiting", interval=0)
    pool.release(theirs)  # idle now: evicted to make room for the waiting call
    got = await asyncio.wait_for(waiting, 5)
    assert got is not held
    assert got is not theirs
    assert pool.size == 2
    pool.release(held)
    pool.release(got)


async def test_no_more_than_max_opening_sessions_are_opened_at_once(fake_backend: Backend) -> None:
    async with pool_of(fake_backend[1], max_opening=2) as pool:
        opening: list[int] = []
        real_open = pool._open

        async def counting_open(*args: Any, **kwargs: Any) -> Any:
            opening.append(pool._opening)
            return await real_open(*args, **kwargs)

        pool._open = counting_open  # type: ignore[method-assign]
        key = pool.key_for(None, CAPS)
        leased = await asyncio.wait_for(
            asyncio.gather(*(pool.lease(key, CAPS, {}, exclusive=True) for _ in range(6))), 10
        )
        assert len({id(p) for p in leased}) == 6
        assert max(opening) == 2, opening
        for pooled in leased:
            pool.release(pooled)


async def test_a_doomed_session_closes_only_when_its_last_user_leaves(pool: SessionPool, fake_backend: Backend) -> None:
    backend, _ = fake_backend
    key = pool.key_for(None, CAPS)
    a = await pool.lease(key, CAPS, {}, exclusive=False)
    b = await pool.lease(key, CAPS, {}, exclusive=False)
    assert a is b
    pool.release(a, reusable=False, exclusive=False)
    assert not backend.deleted_sessions
    assert (await pool.lease(key, CAPS, {}, exclusive=False)) is not a, "a doomed session takes no new users"
    pool.release(b, exclusive=False)
    await eventually(lambda: backend.deleted_sessions, what="the backend session deleted")
    assert len(backend.deleted_sessions) == 1


async def test_an_expired_shared_session_is_reopened_once(pool: SessionPool) -> None:
    key = pool.key_for(None, CAPS)
    pooled = await pool.lease(key, CAPS, {}, exclusive=False)
    expired = pooled.session
    await asyncio.gather(*(pool.reopen(pooled, expired, CAPS, {}) for _ in range(3)))
    assert pooled.session is not expired
    assert pool.initializations == 2
