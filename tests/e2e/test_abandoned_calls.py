"""A call whose client goes away: answered soon after, its session is kept; else it is cancelled.

Cancelling upstream costs a ``notifications/cancelled``, closing the session (``DELETE``) and, for
the next call, a new handshake. A call the backend answers within ``ABANDON_GRACE`` of the client's
leaving has ended like any other, so its session goes back to the pool instead. (A call that is
not answered in that time is cancelled as before: see
``test_gateway_streaming.test_client_disconnect_cancels_the_backend_call``.)
"""

from __future__ import annotations

import aiohttp
import pytest
from fake_backend import FakeBackend
from harness import BareClient, route, running_gateway
from waiting import eventually

from gateway import keys
from gateway.calls import ending

WAIT = 10.0


async def test_a_call_answered_after_its_client_left_keeps_its_session(
    fake_backend: tuple[FakeBackend, str], http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, url = fake_backend
    # Long enough for any machine: the backend answers 0.3 s after the call, whatever the load.
    monkeypatch.setattr(ending, "ABANDON_GRACE", WAIT)
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        assert (await client.call_tool("add", {"a": 1, "b": 1})).text == "2"
        opened = backend.initialize_count
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.05)) as short:
            with pytest.raises(TimeoutError):
                await BareClient(short, gw.url()).call_tool("slow", {"seconds": 0.3})
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        await eventually(lambda: not pool.leased_count, what="the abandoned call's session released", timeout=WAIT)
        assert pool.idle_count == 1
        assert (await client.call_tool("add", {"a": 2, "b": 2})).text == "4"
    assert backend.cancelled == []
    assert backend.initialize_count == opened  # the next call needed no new session
