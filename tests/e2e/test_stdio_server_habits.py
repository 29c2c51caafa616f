"""Two habits of published stdio servers, reproduced by ``tests/peers/habits_stdio.py``:

* a server that asks ``roots/list`` and serves nothing until it is answered
  (``mcp-shrimp-task-manager`` 1.0.21, tested itself in ``tests/interop/test_published_servers.py``):
  a list cannot carry the question to a client, so once a list has waited ``UNCLAIMED_STALL`` the
  session answers it itself; a server that asks but answers lists at once keeps its question for
  the next interactive call's client (``server-filesystem``);
* a server that binds a fixed port, so only one copy can run (``@pollinations/mcp-server-sqlite``
  0.6.6): with ``max_sessions: 1`` (docs/operations.md) concurrent calls take turns on the one
  process, and a process being stopped still counts, so its successor starts only once it is gone.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from harness import BareClient, GatewayHandle, running_gateway, stdio_route
from logged import logged
from peers.runner import free_port

from gateway import keys
from gateway.legacy import unclaimed
from gateway.legacy.pool import SessionPool
from gateway.legacy.session import UNCLAIMED_STALL

PEER = [sys.executable, str(Path(__file__).resolve().parents[1] / "peers" / "habits_stdio.py")]
BOUND = 30.0
ROOTS = {"roots": [{"uri": "file:///srv/by-hand"}]}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def unblocked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The methods of the ``server_request_unblocked`` lines the sessions log."""
    return logged(monkeypatch, unclaimed.log, "server_request_unblocked", "method")


def habits_route(env: dict[str, str], **backend: Any) -> dict[str, Any]:
    return stdio_route("habits", "/mcp", PEER, backend={"timeout": BOUND, "env": env, **backend})


def pool_of(gateway: GatewayHandle) -> SessionPool:
    return gateway.app[keys.ROUTES]["/mcp"].pool


async def work(client: BareClient, text: str, seconds: float = 0.2) -> str:
    reply = await asyncio.wait_for(client.call_tool("work", {"seconds": seconds, "text": text}), BOUND)
    return reply.text


# --- a server that asks for roots before it serves -----------------------------------------------


async def test_a_list_the_server_holds_back_for_its_roots_is_answered_after_the_stall(
    http: aiohttp.ClientSession, unblocked: list[str]
) -> None:
    """The list waits ``UNCLAIMED_STALL``, not the backend's timeout; the server was answered an
    empty list, which the next call's tool reports (the client is not asked: it was answered)."""
    async with running_gateway([habits_route({"HABIT_ROOTS_AT_START": "wait"}, prewarm=0)]) as gateway:
        client = BareClient(http, gateway.url())
        started = time.monotonic()
        listed = await asyncio.wait_for(client.request("tools/list"), BOUND)
        took = time.monotonic() - started
        second = await asyncio.wait_for(client.request("tools/list"), BOUND)
        roots = await client.call_tool("startup_roots")
        assert pool_of(gateway).initializations == 1
    assert {tool["name"] for tool in listed.result["tools"]} == {"startup_roots", "ask_roots", "work"}
    assert second.result == listed.result
    assert UNCLAIMED_STALL <= took < BOUND
    assert unblocked == ["roots/list"]
    assert roots.text == "roots="


async def test_the_same_server_s_call_asks_its_client_as_before(
    http: aiohttp.ClientSession, unblocked: list[str]
) -> None:
    """An interactive call takes the kept request: its client is asked, before the call goes up.

    A ``tools/call`` whose tool schema is not cached (``calls/schemas.py``: per credential, 60 s)
    is preceded by the gateway's own ``tools/list``, a list like any other, which this server holds
    back: here a client without roots calls first (on a session of its own capabilities, unblocked),
    so the schema is known when the client with roots calls, on a new session whose request waits
    for that call."""
    async with running_gateway([habits_route({"HABIT_ROOTS_AT_START": "wait"}, prewarm=0)]) as gateway:
        without_roots = BareClient(http, gateway.url(), capabilities={})
        assert "pid=" in (await work(without_roots, "warm", seconds=0))
        client = BareClient(http, gateway.url())
        first = (await asyncio.wait_for(client.call_tool("startup_roots"), BOUND)).result
        ((key, asked),) = first["inputRequests"].items()
        done = await asyncio.wait_for(client.retry("startup_roots", first["requestState"], {key: ROOTS}), BOUND)
        opened = pool_of(gateway).initializations
    assert asked == {"method": "roots/list"}
    assert done.text == "roots=file:///srv/by-hand"
    assert unblocked == ["roots/list"]  # the first client's session's
    assert opened == 2


async def test_a_server_that_asks_but_answers_lists_keeps_its_question_for_the_next_call(
    http: aiohttp.ClientSession, unblocked: list[str]
) -> None:
    """Lists answered at once leave the start-up request for the next interactive call's client,
    even after more than the stall: nothing waited for it."""
    async with running_gateway([habits_route({"HABIT_ROOTS_AT_START": "ask"}, prewarm=0)]) as gateway:
        client = BareClient(http, gateway.url())
        assert "tools" in (await asyncio.wait_for(client.request("tools/list"), BOUND)).result
        await asyncio.sleep(UNCLAIMED_STALL + 0.5)  # deliberate: longer than the stall, with nothing waiting
        assert "tools" in (await asyncio.wait_for(client.request("tools/list"), BOUND)).result
        first = (await asyncio.wait_for(client.call_tool("startup_roots"), BOUND)).result
        ((key, asked),) = first["inputRequests"].items()
        done = await asyncio.wait_for(client.retry("startup_roots", first["requestState"], {key: ROOTS}), BOUND)
    assert asked == {"method": "roots/list"}
    assert done.text == "roots=file:///srv/by-hand"
    assert unblocked == []


# --- a server only one copy of which can run ----------------------------------------------------


def single_copy_route(port: int, **backend: Any) -> dict[str, Any]:
    """The documented settings for such a server: one session (stdio: one process), at most one spare."""
    settings = {"max_sessions": 1, "prewarm": 1, "session_wait": BOUND, **backend}
    return habits_route({"HABIT_PORT": str(port)}, **settings)


async def test_concurrent_calls_take_turns_on_the_one_process(http: aiohttp.ClientSession) -> None:
    async with running_gateway([single_copy_route(free_port())]) as gateway:
        pool = pool_of(gateway)
        clients = [BareClient(http, gateway.url()) for _ in range(4)]
        started = time.monotonic()
        texts, listed = await asyncio.gather(
            asyncio.gather(*(work(client, str(n)) for n, client in enumerate(clients))),
            clients[0].request("tools/list"),
        )
        took = time.monotonic() - started
        failures, opened = pool.health.failures, pool.initializations
    pids = {text.split()[0] for text in texts}
    assert [text.split()[1] for text in texts] == [f"text={n}" for n in range(4)]
    assert len(pids) == 1, texts
    assert "tools" in listed.result
    assert took >= 4 * 0.2  # one after another
    assert failures == 0, "no process failed to start"
    assert opened == 1


async def test_a_closed_session_s_process_is_gone_before_the_next_one_starts(http: aiohttp.ClientSession) -> None:
    """A client's roots answer closes its session after the call (docs/session-state.md); this
    server outlives its stdin, so its process is stopped only after ``STOP_GRACE`` (SIGTERM). The
    calls after it wait for that instead of starting a process that cannot bind the port."""
    async with running_gateway([single_copy_route(free_port(), prewarm=0)]) as gateway:
        pool = pool_of(gateway)
        client = BareClient(http, gateway.url())
        first = (await asyncio.wait_for(client.call_tool("ask_roots"), BOUND)).result
        ((key, _),) = first["inputRequests"].items()
        done = await asyncio.wait_for(client.retry("ask_roots", first["requestState"], {key: ROOTS}), BOUND)
        texts = await asyncio.gather(*(work(BareClient(http, gateway.url()), str(n)) for n in range(3)))
        failures, opened = pool.health.failures, pool.initializations
    assert done.text == "roots=file:///srv/by-hand"
    assert [text.split()[1] for text in texts] == ["text=0", "text=1", "text=2"]
    assert len({text.split()[0] for text in texts}) == 1
    assert failures == 0, "no process failed to start"
    assert opened == 2
