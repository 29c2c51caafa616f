"""Per-request isolation of pooled legacy sessions (issue 17), with published servers that keep what
their client said per session, driven by the official mcp 2.3.0 client pinned to "2026-07-28".

Two clients with different roots take turns through one route, under one principal and anonymously
(every anonymous caller shares one pool key): each must only ever see its own roots.

* ``@modelcontextprotocol/server-everything`` caches the first roots answer of a session
  (``server/roots.js``: ``syncRoots`` asks once per session id) and its ``get-roots-list`` tool
  reports it;
* ``@modelcontextprotocol/server-filesystem``, started without a directory, serves only the
  directories of the roots answer its session got (``dist/index.js``: ``oninitialized``).

A session that was given a client's roots answer serves no other request: it is closed when its
call ends, and the next call opens a fresh one, whose server asks its own client
(docs/session-state.md). The log level of a 2026-07-28 request (``_meta``
``io.modelcontextprotocol/logLevel``) is applied by the gateway to what it forwards and is never
sent upstream as ``logging/setLevel``, so no caller's level outlives its request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from fake_backend import FAKE_BACKEND_KEY, start_fake_backend
from harness import GatewayHandle, route, running_gateway
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from gateway import keys
from gateway.legacy.streamable_http import StreamableHttpSession
from interop.test_published_servers import (
    BACKEND,
    EMPTY_ALLOWED,
    MODERN,
    allowed_directories_once_applied,
    everything_server,
    npm_server,
    only_text,
    published_stdio_route,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]  # every call opens a session; RUN_TIMEOUT bounds each test

CALLS = 100
"""Alternating calls per test: 50 per client."""
EXTRA_LIST_CALLS = 100
"""server-filesystem: most further list calls made when none of the first CALLS saw its own roots."""
RUN_TIMEOUT = 240.0
"""Bound on one test: every call opens a backend session (for stdio, takes a started process)."""
USER_HEADER = "X-Forwarded-User"
PRINCIPALS = [None, "alice"]
"""Anonymous (every caller shares one pool key), then two clients of one principal."""


@dataclass
class Roots:
    """A client's roots callback over fixed URIs, counting how often it was asked."""

    uris: tuple[str, ...]
    asked: int = 0

    async def __call__(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=uri.rsplit("/", 1)[-1]) for uri in self.uris])


@dataclass
class LogSink:
    """What a client's logging callback received."""

    levels: list[str] = field(default_factory=list)
    data: list[str] = field(default_factory=list)

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.levels.append(params.level)
        self.data.append(str(params.data))


def isolated_route(name: str, route_: dict[str, Any], principal: str | None) -> dict[str, Any]:
    """``route_`` as is (anonymous), or behind a trusted header that names the principal."""
    if principal is not None:
        route_ = {**route_, "auth": {"trusted_header": {"header": USER_HEADER, "proxies": ["127.0.0.0/8"]}}}
    return {**route_, "name": name}


@asynccontextmanager
async def client_of(gateway: GatewayHandle, principal: str | None, **callbacks: Any) -> AsyncIterator[Client]:
    headers = {USER_HEADER: principal} if principal is not None else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http_client,
        Client(streamable_http_client(gateway.url(), http_client=http_client), mode=MODERN, **callbacks) as client,
    ):
        assert client.protocol_version == MODERN
        yield client


def assert_settled(gateway: GatewayHandle) -> None:
    """No hold left, no session leased, and no session given a client's roots kept for reuse."""
    assert len(gateway.app[keys.HOLDS]) == 0
    for runtime in gateway.app[keys.ROUTES].values():
        assert runtime.pool.leased_count == 0
        assert not [p for p in runtime.pool.idle_sessions() if p.doomed]


@pytest.fixture(scope="module")
def everything_url(peer_log_dir: Path) -> Iterator[str]:
    with everything_server("streamableHttp", peer_log_dir) as url:
        yield url


@pytest.mark.parametrize("principal", PRINCIPALS)
async def test_server_everything_lists_only_the_roots_of_the_client_that_calls(
    everything_url: str, principal: str | None
) -> None:
    alpha, beta = Roots(("file:///srv/alpha",)), Roots(("file:///srv/beta",))
    route_ = isolated_route("everything", route("everything", "/mcp", everything_url, backend=BACKEND), principal)
    with anyio.fail_after(RUN_TIMEOUT):
        async with (
            running_gateway([route_]) as gateway,
            client_of(gateway, principal, list_roots_callback=alpha) as client_a,
            client_of(gateway, principal, list_roots_callback=beta) as client_b,
        ):
            turns = [(client_a, alpha, beta), (client_b, beta, alpha)]
            for i in range(CALLS):
                client, own, other = turns[i % 2]
                listed = only_text(await client.call_tool("get-roots-list", {}))
                assert listed.startswith("Current MCP Roots (1 total):"), (i, listed)
                assert f"URI: {own.uris[0]}" in listed, (i, listed)
                assert other.uris[0] not in listed, (i, listed)
            assert_settled(gateway)
    # every call was asked its own roots (its session had never been given anyone's)
    assert alpha.asked >= CALLS // 2
    assert beta.asked >= CALLS // 2


async def test_the_route_s_static_roots_stay_everyone_s_answer_and_the_session_stays_pooled(tmp_path: Path) -> None:
    """A route's ``roots`` are the operator's answer for every caller: server-filesystem's
    session-start ``roots/list`` is answered with them, no client is asked, and the one session is
    reused by both clients (no new session per call)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    route_ = published_stdio_route([npm_server("filesystem")], prewarm=0)
    route_["roots"] = [{"uri": workspace.as_uri(), "name": "workspace"}]
    alpha, beta = Roots(((tmp_path / "alpha").as_uri(),)), Roots(((tmp_path / "beta").as_uri(),))
    with anyio.fail_after(RUN_TIMEOUT):
        async with (
            running_gateway([route_]) as gateway,
            client_of(gateway, None, list_roots_callback=alpha) as client_a,
            client_of(gateway, None, list_roots_callback=beta) as client_b,
        ):
            (runtime,) = gateway.app[keys.ROUTES].values()
            assert await allowed_directories_once_applied(client_a) == f"Allowed directories:\n{workspace.resolve()}"
            for i in range(10):
                allowed = only_text(await (client_a, client_b)[i % 2].call_tool("list_allowed_directories", {}))
                assert allowed == f"Allowed directories:\n{workspace.resolve()}", (i, allowed)
            opened = runtime.pool.initializations
            assert_settled(gateway)
    assert alpha.asked == beta.asked == 0
    assert opened == 1


async def test_server_filesystem_clients_cannot_reach_each_other_s_directories(tmp_path: Path) -> None:
    """server-filesystem with no directory of its own: each client's roots are its only directories.
    A client never lists or reads the other's directory. (The server applies a roots answer
    asynchronously, ``roots-utils.js``, so a call that follows its session's answer closely may still
    see no directory at all; never another client's.)"""
    dir_a, dir_b = tmp_path / "alpha", tmp_path / "beta"
    for directory in (dir_a, dir_b):
        directory.mkdir()
        (directory / "secret.txt").write_text(f"secret of {directory.name}\n")
    alpha, beta = Roots((dir_a.as_uri(),)), Roots((dir_b.as_uri(),))
    route_ = published_stdio_route([npm_server("filesystem")], prewarm=4)
    own_listed = 0
    with anyio.fail_after(RUN_TIMEOUT):
        async with (
            running_gateway([route_]) as gateway,
            client_of(gateway, None, list_roots_callback=alpha) as client_a,
            client_of(gateway, None, list_roots_callback=beta) as client_b,
        ):
            turns = [(client_a, dir_a, dir_b), (client_b, dir_b, dir_a)]
            for i in range(CALLS):
                client, own, other = turns[i % 2]
                if i % 4 < 2:
                    allowed = only_text(await client.call_tool("list_allowed_directories", {}))
                    assert allowed in (EMPTY_ALLOWED, f"Allowed directories:\n{own.resolve()}"), (i, allowed)
                    own_listed += allowed != EMPTY_ALLOWED
                else:
                    theirs = await client.call_tool("read_text_file", {"path": str(other / "secret.txt")})
                    assert theirs.is_error, (i, theirs.content)
                    assert f"secret of {other.name}" not in str(theirs.content)
            # The clients' own roots do reach the server: each call's session asked its own client.
            # Whether a call sees them depends on how fast the server applies the answer, so a
            # run where no list call happened to see them retries (bounded) until one does.
            for i in range(EXTRA_LIST_CALLS):
                if own_listed:
                    break
                client, own, _ = turns[i % 2]
                allowed = only_text(await client.call_tool("list_allowed_directories", {}))
                assert allowed in (EMPTY_ALLOWED, f"Allowed directories:\n{own.resolve()}"), (i, allowed)
                own_listed += allowed != EMPTY_ALLOWED
            assert_settled(gateway)
    assert alpha.asked >= CALLS // 2
    assert beta.asked >= CALLS // 2
    assert own_listed > 0


async def test_a_request_s_log_level_is_applied_to_it_alone_and_never_sent_upstream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bundled legacy demo server keeps a log level per session (``logging/setLevel``, default
    ``debug``) and its ``count`` tool logs at ``info``. Two clients at ``debug`` and ``error`` take
    turns on the same pooled session: each hears what its own level lets through, and no
    ``logging/setLevel`` leaves the gateway, so the session's level is still the server's default.
    (server-everything logs only on its standalone stream, after the call it concerns has ended.)"""
    sent: list[str] = []
    start, notify = StreamableHttpSession.start, StreamableHttpSession.notify

    async def recording_start(self: StreamableHttpSession, method: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(method)
        return await start(self, method, *args, **kwargs)

    async def recording_notify(self: StreamableHttpSession, method: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(method)
        return await notify(self, method, *args, **kwargs)

    monkeypatch.setattr(StreamableHttpSession, "start", recording_start)
    monkeypatch.setattr(StreamableHttpSession, "notify", recording_notify)
    loud, quiet = LogSink(), LogSink()
    runner, url = await start_fake_backend()
    try:
        demo = runner.app[FAKE_BACKEND_KEY]
        with anyio.fail_after(RUN_TIMEOUT):
            async with (
                running_gateway([route("demo", "/mcp", url)]) as gateway,
                client_of(gateway, None, log_level="debug", logging_callback=loud) as client_a,
                client_of(gateway, None, log_level="error", logging_callback=quiet) as client_b,
            ):
                (runtime,) = gateway.app[keys.ROUTES].values()
                for i in range(20):
                    result = await (client_a, client_b)[i % 2].call_tool("count", {"n": 2})
                    assert only_text(result) == "counted=2"
                opened = runtime.pool.initializations
                levels = {session.log_level for session in demo.sessions.values()}
                assert_settled(gateway)
    finally:
        await runner.cleanup()
    assert loud.data == ["count 1/2", "count 2/2"] * 10
    assert quiet.levels == []
    assert "logging/setLevel" not in sent
    assert levels == {"debug"}
    assert opened == 1  # one pooled session served both clients
