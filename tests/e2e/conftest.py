"""Fixtures for gateway tests against the in-process fake legacy server (tests/fake_backend.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from fake_backend import FAKE_BACKEND_KEY, FakeBackend, start_fake_backend
from hostile import HostileBackend, hostile_backend


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def backend() -> AsyncIterator[HostileBackend]:
    """A scriptable hostile legacy server (tests/hostile.py)."""
    async with hostile_backend() as hostile:
        yield hostile


@pytest.fixture
async def fake_backend(request: pytest.FixtureRequest) -> AsyncIterator[tuple[FakeBackend, str]]:
    opts: dict[str, Any] = getattr(request, "param", {})
    runner, url = await start_fake_backend(**opts)
    try:
        yield runner.app[FAKE_BACKEND_KEY], url
    finally:
        await runner.cleanup()


@pytest.fixture
async def silent_owner() -> AsyncIterator[str]:
    """An address whose process accepts connections and reads nothing, answers nothing (no
    ``100 Continue``): a stopped or stalled owner replica, as far as the hop can tell."""
    held: list[asyncio.StreamWriter] = []

    async def accept_and_ignore(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept_and_ignore, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
