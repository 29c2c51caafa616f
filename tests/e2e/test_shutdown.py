"""Shutdown leaves nothing running: every background task of the gateway has an owner that ends it.

A gateway stopped while it holds calls, serves listen streams and has calls in flight must leave no
pending task of its own behind (a task nobody awaits may be collected half-way: "Task was destroyed
but it is pending") — hold expiries, backend cancellations, closes of dead sessions and the reapers
all belong to a group or a cleanup context of the app that ends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fake_backend import FakeBackend
from harness import BareClient, client_disconnects, listen_request, route, running_gateway

from gateway import keys

Backend = tuple[FakeBackend, str]
GATEWAY = Path(__file__).resolve().parents[2] / "gateway"
DEMO = GATEWAY / "demo"


def _gateway_tasks() -> list[asyncio.Task[Any]]:
    """Pending tasks running gateway code (the demo backend's own tasks are not the gateway's)."""
    found = []
    for task in asyncio.all_tasks():
        if task.done() or task is asyncio.current_task():
            continue
        files = [Path(frame.f_code.co_filename) for frame in task.get_stack(limit=50)]
        coro = task.get_coro()
        code = getattr(coro, "cr_code", None)
        if code is not None:
            files.append(Path(code.co_filename))
        if any(f.is_relative_to(GATEWAY) and not f.is_relative_to(DEMO) for f in files):
            found.append(task)
    return found


async def _open_listen(http: aiohttp.ClientSession, url: str) -> aiohttp.ClientResponse:
    body, headers = listen_request()
    response = await http.post(url, data=body, headers=headers)
    assert response.content_type == "text/event-stream"
    async with asyncio.timeout(10):
        while not (await response.content.readline()).startswith(b"data:"):
            pass  # up to the acknowledgement
    return response


async def test_shutdown_with_held_calls_listen_streams_and_calls_in_flight_leaves_no_pending_task(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(str(context.get("message"))))
    in_flight: asyncio.Task[Any] | None = None
    try:
        async with running_gateway([route("demo", "/mcp", url)]) as gw:
            client = BareClient(http, gw.url())
            held = [(await client.call_tool("ask_city")).result for _ in range(3)]
            assert {result["resultType"] for result in held} == {"input_required"}
            assert len(gw.app[keys.HOLDS]) == 3
            stream = await _open_listen(http, gw.url())

            pool = gw.app[keys.ROUTES]["/mcp"].pool
            leased = asyncio.Event()
            lease = pool.lease

            async def lease_and_tell(*args: Any, **kwargs: Any) -> Any:
                pooled = await lease(*args, **kwargs)
                leased.set()
                return pooled

            pool.lease = lease_and_tell  # type: ignore[method-assign]
            in_flight = asyncio.create_task(client.call_tool("slow", {"seconds": 60}))
            async with asyncio.timeout(10):
                await leased.wait()
        # Right as the app's cleanup returns: nothing of the gateway may still be running.
        leftover = _gateway_tasks()
        assert not leftover, [task.get_name() for task in leftover]
        # The listen stream ended with its final result when the gateway shut down.
        async with asyncio.timeout(10):
            rest = await stream.content.read()
        stream.release()
        assert b'"resultType":"complete"' in rest
        with contextlib.suppress(aiohttp.ClientError, AssertionError):
            async with asyncio.timeout(10):
                await in_flight
        gc.collect()
        await asyncio.sleep(0)  # let the loop report what the collection found, if anything
        assert not [message for message in reported if "destroyed" in message], reported
    finally:
        if in_flight is not None and not in_flight.done():
            in_flight.cancel()
        loop.set_exception_handler(previous)


async def test_shutdown_while_an_abandoned_call_is_still_being_cancelled_upstream_leaves_no_pending_task(
    fake_backend: Backend, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that goes away leaves a backend call to cancel (notifications/cancelled, in the
    background); a backend that does not answer keeps that work running. Shutting down then must
    end it: the background group is cancelled and awaited before the app's cleanup returns."""
    backend, url = fake_backend
    disconnected = client_disconnects(monkeypatch)
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        leased = asyncio.Event()
        lease = pool.lease

        async def lease_and_tell(*args: Any, **kwargs: Any) -> Any:
            pooled = await lease(*args, **kwargs)
            leased.set()
            return pooled

        pool.lease = lease_and_tell  # type: ignore[method-assign]
        call = asyncio.create_task(BareClient(http, gw.url()).call_tool("slow", {"seconds": 60}))
        async with asyncio.timeout(10):
            await leased.wait()
        backend.hang = True  # from now on the backend answers no POST (the cancellation included)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        async with asyncio.timeout(10):
            await disconnected.wait()
    leftover = _gateway_tasks()
    assert not leftover, [task.get_name() for task in leftover]
