"""Issue 20 item 1: stdio server processes, and their own children, never outlive the gateway.

A gateway killed outright (SIGKILL: the OOM killer, a crash) runs no cleanup, and its stdio
servers run in process groups of their own; the orphan guard (``gateway.legacy.orphans``) kills
those groups when its pipe from the gateway ends. A session's normal close stops what is left of
the server's group too (``npx`` → ``node``). The peer (``tests/peers/stubborn_stdio.py``) ignores
the end of its stdin, SIGTERM and SIGHUP, and keeps a child in its group.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import aiohttp
from harness import TEST_KEY, BareClient, _free_port
from waiting import eventually, until_status

from gateway.legacy.stdio import StdioSession

PEER = Path(__file__).resolve().parents[1] / "peers" / "stubborn_stdio.py"
BOUND = 30  # seconds: every wait here is bounded
GONE_WITHIN = 5.0


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as gone: it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


def recorded(pids_file: Path) -> list[int]:
    text = pids_file.read_text(encoding="utf-8") if pids_file.exists() else ""
    return [int(pid) for line in text.splitlines() for pid in line.split()]


async def all_gone(pids: list[int], within: float, what: str) -> None:
    def left() -> list[int]:
        return [pid for pid in pids if alive(pid)]

    await eventually(lambda: not left(), what=lambda: f"{what}; still alive: {left()}", timeout=within, interval=0.05)


async def test_stdio_servers_and_their_children_die_with_a_killed_gateway(tmp_path: Path) -> None:
    port, pids_file = _free_port(), tmp_path / "pids"
    backend = {
        "transport": "stdio",
        "command": [sys.executable, str(PEER)],
        "env": {"STUBBORN_PIDS": str(pids_file)},
    }
    config = tmp_path / "gateway.yaml"
    config.write_text(
        json.dumps(
            {
                "state": {"keys": [TEST_KEY]},
                "listen": {"host": "127.0.0.1", "port": port},
                "logging": {"json": True},
                "routes": [{"name": "stubborn", "path": "/mcp", "backend": backend}],
            }
        ),
        encoding="utf-8",
    )
    with (tmp_path / "gateway.log").open("wb") as log:
        gateway = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "serve", "--config", str(config), stdout=log, stderr=log
        )
    pids: list[int] = []
    try:
        async with asyncio.timeout(BOUND), aiohttp.ClientSession() as http:
            await until_status(http, f"http://127.0.0.1:{port}/readyz", timeout=BOUND)
            reply = await BareClient(http, f"http://127.0.0.1:{port}/mcp").call_tool("echo", {"text": "hi"})
            assert reply.status == 200, reply
            assert reply.result["content"][0]["text"] == "echo=hi"
        pids = recorded(pids_file)
        assert len(pids) >= 2, "the call's server and its child exist"
        assert all(alive(pid) for pid in pids)
        gateway.kill()
        async with asyncio.timeout(BOUND):
            await gateway.wait()
        await all_gone(pids, GONE_WITHIN, "every server and its child die with the gateway")
    finally:
        if gateway.returncode is None:
            gateway.kill()
            await gateway.wait()
        for pid in recorded(pids_file):
            if alive(pid):
                os.kill(pid, 9)


async def test_closing_a_session_stops_what_is_left_of_its_process_group(tmp_path: Path) -> None:
    """The server exits at the end of its stdin, its child does not: close() ends the child too."""
    pids_file = tmp_path / "pids"
    env = {"STUBBORN_PIDS": str(pids_file), "STUBBORN_MODE": "leave"}
    session = StdioSession([sys.executable, str(PEER)], env=env, capabilities={}, timeout=10, connect_timeout=10)
    try:
        async with asyncio.timeout(BOUND):
            await session.open()
            server, child = recorded(pids_file)
            assert alive(child)
            await session.close()
        assert session.returncode == 0, "the server itself exited at the end of its stdin"
        await all_gone([server, child], GONE_WITHIN, "the server and its child are gone")
    finally:
        await session.close()
        for pid in recorded(pids_file):
            if alive(pid):
                os.kill(pid, 9)
