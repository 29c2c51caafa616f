"""Fixtures for gateway tests against the in-process fake legacy server (tests/fake_backend.py)."""

from __future__ import annotations

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
