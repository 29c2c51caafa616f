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

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = Path(__file__).resolve().parent / "peers"
PEER_START_TIMEOUT = 20.0
PEER_STOP_TIMEOUT = 5.0
_POLL_INTERVAL = 0.05


class PeerStartError(RuntimeError):
    """A peer subprocess exited or did not answer HTTP before the deadline."""


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (the peer binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def legacy_python() -> str:
    python = os.environ.get("MRTR_LEGACY_PYTHON") or str(REPO_ROOT / ".venv-legacy" / "bin" / "python")
    if not Path(python).exists():
        pytest.fail(
            f"legacy interpreter {python} is missing; run `bash scripts/bootstrap.sh` from the repo root "
            "(or point MRTR_LEGACY_PYTHON at a python with mcp==1.30.0)",
            pytrace=False,
        )
    return python


def _answers_http(port: int) -> bool:
    """True once something on the port answers a plain HTTP request with a status line.

    ``/`` is not an MCP route, so no peer opens a stream for it; any status (404) means the
    server finished its startup and accepts requests.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.settimeout(1.0)
            sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            return sock.recv(5) == b"HTTP/"
    except OSError:
        return False


@contextmanager
def run_peer(name: str, argv: list[str], port: int, log_dir: Path) -> Iterator[None]:
    """Run ``argv`` until the block exits; return from ``__enter__`` once port ``port`` answers HTTP."""
    log_path = log_dir / f"{name}-{port}.stderr.log"
    with log_path.open("w+b") as stderr:
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + PEER_START_TIMEOUT
            while not _answers_http(port):
                try:
                    # Doubles as the poll pause and as the early exit when the peer dies.
                    code = proc.wait(timeout=_POLL_INTERVAL)
                except subprocess.TimeoutExpired:
                    code = None
                if code is not None or time.monotonic() > deadline:
                    stderr.flush()
                    output = log_path.read_text(errors="replace")
                    why = f"exited with code {code}" if code is not None else f"not ready in {PEER_START_TIMEOUT}s"
                    raise PeerStartError(f"peer {name} {why}: {' '.join(argv)}\n--- stderr ({log_path}) ---\n{output}")
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=PEER_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def legacy_argv(
    port: int,
    *,
    transport: str = "streamable-http",
    json_response: bool = False,
    stateless: bool = False,
    log_level: str = "INFO",
) -> list[str]:
    argv = [legacy_python(), str(PEERS_DIR / "legacy_fastmcp.py"), "--port", str(port)]
    argv += ["--transport", transport, "--log-level", log_level]
    if json_response:
        argv.append("--json-response")
    if stateless:
        argv.append("--stateless")
    return argv


def legacy_url(port: int, transport: str) -> str:
    return f"http://127.0.0.1:{port}/sse" if transport == "sse" else f"http://127.0.0.1:{port}/mcp"


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
