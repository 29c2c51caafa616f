"""Running real MCP peers as subprocesses on free loopback ports (used by tests/conftest.py and
by tests that need to stop or restart a peer themselves)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = Path(__file__).resolve().parent
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
def run_peer(
    name: str,
    argv: list[str],
    port: int,
    log_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    start_timeout: float = PEER_START_TIMEOUT,
) -> Iterator[None]:
    """Run ``argv`` until the block exits; return from ``__enter__`` once port ``port`` answers HTTP.

    ``env`` is added to the test process's environment (published servers take their port and
    options from variables); ``start_timeout`` bounds the wait for the port."""
    log_path = log_dir / f"{name}-{port}.stderr.log"
    child_env = {**os.environ, **env} if env is not None else None
    with log_path.open("w+b") as stderr:
        proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=child_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr
        )
        try:
            deadline = time.monotonic() + start_timeout
            while not _answers_http(port):
                try:
                    # Doubles as the poll pause and as the early exit when the peer dies.
                    code = proc.wait(timeout=_POLL_INTERVAL)
                except subprocess.TimeoutExpired:
                    code = None
                if code is not None or time.monotonic() > deadline:
                    stderr.flush()
                    output = log_path.read_text(errors="replace")
                    why = f"exited with code {code}" if code is not None else f"not ready in {start_timeout}s"
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
