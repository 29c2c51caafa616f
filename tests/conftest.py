"""Real MCP peers as subprocess fixtures.

The legacy peer (``mcp==1.30.0`` FastMCP) and the native 2026-07-28 peer (``mcp==2.3.0``
``MCPServer``) cannot share an interpreter, so every peer runs as its own process on a free
loopback port. Readiness is polled (an HTTP status line from the port, within
``PEER_START_TIMEOUT`` seconds); a peer that dies or stays silent fails the fixture with its
captured stderr. Each peer's stderr is kept in pytest's temporary directory for post-mortems.

Fixtures (each yields a URL string):

* ``legacy_server`` - session-scoped, streamable HTTP, stateful, SSE responses: ``http://127.0.0.1:P/mcp``
* ``legacy_sse_server`` - session-scoped, the 2024-11-05 HTTP+SSE transport: ``http://127.0.0.1:P/sse``
* ``native_sse_server`` - session-scoped, mcp 2.3.0 MCPServer on HTTP+SSE: ``http://127.0.0.1:P/sse``
* ``native_server`` - session-scoped, streamable HTTP: ``http://127.0.0.1:P/mcp``
* ``start_legacy_server(**opts)`` - function-scoped factory for variants
  (``transport=``, ``json_response=``, ``stateless=``, ``log_level=``); stopped after the test.

The legacy interpreter is ``$MRTR_LEGACY_PYTHON`` or ``<repo>/.venv-legacy/bin/python``; the modern
one is the interpreter running pytest.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from peers.runner import (
    PEERS_DIR,
    free_port,
    legacy_argv,
    legacy_url,
    run_peer,
)

from gateway.legacy.orphans import GUARD


@pytest.fixture(scope="session")
def event_loop_policy() -> asyncio.AbstractEventLoopPolicy:
    """The loop of the in-process tests: the standard library's, or uvloop's with
    ``MRTR_TEST_LOOP=uvloop`` (the loop a gateway process takes when uvloop is installed; its own
    processes in the e2e tests serve on it either way)."""
    if os.environ.get("MRTR_TEST_LOOP") == "uvloop":
        import uvloop

        policy: asyncio.AbstractEventLoopPolicy = uvloop.EventLoopPolicy()
        return policy
    return asyncio.DefaultEventLoopPolicy()


@pytest.fixture(scope="session", autouse=True)
def _orphan_guard_reaped() -> Iterator[None]:
    """The stdio orphan guard of the test process (one per gateway process) is ended and reaped
    when the session ends, not left running at interpreter exit (a ResourceWarning)."""
    yield
    GUARD.close()


@pytest.fixture(scope="session")
def peer_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("peer-logs")


@pytest.fixture(scope="session")
def legacy_server(peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    with run_peer("legacy-streamable-http", legacy_argv(port), port, peer_log_dir):
        yield legacy_url(port, "streamable-http")


@pytest.fixture(scope="session")
def legacy_sse_server(peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    with run_peer("legacy-sse", legacy_argv(port, transport="sse"), port, peer_log_dir):
        yield legacy_url(port, "sse")


@pytest.fixture(scope="session")
def native_sse_server(peer_log_dir: Path) -> Iterator[str]:
    """mcp 2.3.0 MCPServer on the 2024-11-05 HTTP+SSE transport (handshake-era sessions, inline requests)."""
    port = free_port()
    argv = [sys.executable, str(PEERS_DIR / "sse_mcpserver.py"), "--port", str(port)]
    with run_peer("native-sse", argv, port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/sse"


@pytest.fixture(scope="session")
def native_server(peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, str(PEERS_DIR / "native_mcpserver.py"), "--port", str(port)]
    with run_peer("native", argv, port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def start_legacy_server(peer_log_dir: Path) -> Iterator[Callable[..., str]]:
    """Factory: ``start_legacy_server(json_response=True)`` -> URL; every peer it started stops after the test."""
    with ExitStack() as stack:

        def start(
            *,
            transport: str = "streamable-http",
            json_response: bool = False,
            stateless: bool = False,
            log_level: str = "INFO",
        ) -> str:
            port = free_port()
            argv = legacy_argv(
                port, transport=transport, json_response=json_response, stateless=stateless, log_level=log_level
            )
            variant = "-".join([transport] + ["json"] * json_response + ["stateless"] * stateless)
            stack.enter_context(run_peer(f"legacy-{variant}", argv, port, peer_log_dir))
            return legacy_url(port, transport)

        yield start
