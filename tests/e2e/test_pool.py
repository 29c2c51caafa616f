"""Session pool: exclusive leases for interactive calls, shared leases for plain ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from gateway.config.model import RouteConfig
from gateway.demo.backend import DemoBackend
from gateway.errors import Overloaded
from gateway.legacy.pool import SessionPool

Backend = tuple[DemoBackend, str]
CAPS: dict[str, Any] = {"elicitation": {"form": {}}}


@pytest.fixture
async def pool(fake_backend: Backend) -> AsyncIterator[SessionPool]:
    _, url = fake_backend
    async with aiohttp.ClientSession() as http:
        route = RouteConfig.model_validate({"name": "r", "path": "/mcp", "backend": {"url": url, "max_sessions": 2}})
        pool = SessionPool(http, route)
        yield pool
        await pool.close()


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


async def test_the_bound_refuses_an_interactive_call_when_every_session_is_held(pool: SessionPool) -> None:
    key = pool.key_for(None, CAPS)
    held = [await pool.lease(key, CAPS, {}, exclusive=True) for _ in range(2)]
    with pytest.raises(Overloaded):
        await pool.lease(key, CAPS, {}, exclusive=True)
    plain = await pool.lease(key, CAPS, {}, exclusive=False)
    assert plain in held, "a plain call rides on a held session instead of being refused"
    pool.release(plain, exclusive=False)
    pool.release(held[0])
    assert await pool.lease(key, CAPS, {}, exclusive=True) is held[0]


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
    async with asyncio.timeout(5):
        while not backend.deleted_sessions:
            await asyncio.sleep(0.01)
    assert len(backend.deleted_sessions) == 1


async def test_an_expired_shared_session_is_reopened_once(pool: SessionPool) -> None:
    key = pool.key_for(None, CAPS)
    pooled = await pool.lease(key, CAPS, {}, exclusive=False)
    expired = pooled.session
    await asyncio.gather(*(pool.reopen(pooled, expired, CAPS, {}) for _ in range(3)))
    assert pooled.session is not expired
    assert pool.initializations == 2
