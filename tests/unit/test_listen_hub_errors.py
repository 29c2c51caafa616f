"""A listener's ``resources/subscribe`` the backend refuses is the backend's own error, relayed (UpstreamError)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp_types.jsonrpc import INVALID_PARAMS

from gateway.errors import UpstreamError
from gateway.legacy.session import FinalResponse, ServerNotification
from gateway.listen.hub import ListenHub
from gateway.listen.translate import Listener


class _Exchange:
    def __init__(self, error: dict[str, Any]) -> None:
        self._error = error

    async def next(self, timeout: float) -> FinalResponse:
        return FinalResponse(error=self._error)

    async def aclose(self) -> None:
        return None


class _Session:
    initialize_result: dict[str, Any] = {"capabilities": {"resources": {"subscribe": True}}}
    broken = False

    async def start(self, method: str, params: dict[str, Any], meta: dict[str, Any]) -> _Exchange:
        return _Exchange({"code": INVALID_PARAMS, "message": "Unknown resource: x://y", "data": {"uri": "x://y"}})

    async def close(self) -> None:
        return None


async def test_a_refused_subscription_is_the_backends_error_with_its_status() -> None:
    sink: asyncio.Queue[ServerNotification] = asyncio.Queue()
    hub = ListenHub(_Session(), sink, timeout=1.0)  # type: ignore[arg-type]
    try:
        listener = Listener(1, {"resourceSubscriptions": ["x://y"]})
        with pytest.raises(UpstreamError) as refused:
            await hub.add(listener)
        error = refused.value
        assert (error.http_status, error.to_error()) == (
            400,
            {"code": INVALID_PARAMS, "message": "Unknown resource: x://y", "data": {"uri": "x://y"}},
        )
    finally:
        await hub.close(graceful=False)
