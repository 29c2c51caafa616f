"""``listen.event_loop``: a gateway process serves on uvloop when it is installed (``auto``, the
default), on the standard loop when told to, and refuses to start when told ``uvloop`` without it.

Each case is a process of its own (``mrtr-gateway serve``) in front of the real legacy server: the
loop is the process's, so it cannot be chosen inside the test's own event loop."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest
from harness import TEST_KEY, BareClient, _free_port, accept, start_serve
from waiting import until_status

from gateway import server

BOUND = 30.0


def _config(tmp_path: Path, port: int, backend_url: str, event_loop: str | None) -> Path:
    listen: dict[str, object] = {"host": "127.0.0.1", "port": port}
    if event_loop is not None:
        listen["event_loop"] = event_loop
    config = tmp_path / "gateway.yaml"
    config.write_text(
        json.dumps(
            {
                "state": {"keys": [TEST_KEY]},
                "listen": listen,
                "logging": {"json": True},
                "routes": [{"name": "legacy", "path": "/mcp", "backend": {"url": backend_url, "timeout": 10}}],
            }
        ),
        encoding="utf-8",
    )
    return config


def test_auto_takes_uvloop_when_installed_and_asyncio_is_always_there(monkeypatch: pytest.MonkeyPatch) -> None:
    assert server.event_loop("asyncio").name == "asyncio"
    assert server.event_loop("auto").name == "uvloop"  # the test extra installs it
    assert server.event_loop("uvloop").name == "uvloop"
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed: its import fails
    assert server.event_loop("auto").name == "asyncio"
    with pytest.raises(server.LoopUnavailable, match=r"pip install 'mrtr-gateway\[uvloop\]'"):
        server.event_loop("uvloop")


@pytest.mark.parametrize(("event_loop", "expected"), [(None, "uvloop"), ("asyncio", "asyncio"), ("uvloop", "uvloop")])
async def test_the_process_serves_a_two_round_call_on_the_loop_it_names(
    legacy_server: str, tmp_path: Path, event_loop: str | None, expected: str
) -> None:
    port = _free_port()
    proc = await start_serve(_config(tmp_path, port, legacy_server, event_loop))
    try:
        async with aiohttp.ClientSession() as http:
            await until_status(http, f"http://127.0.0.1:{port}/readyz", timeout=BOUND)
            client = BareClient(http, f"http://127.0.0.1:{port}/mcp")
            first = (await client.call_tool("ask_city")).result
            (key,) = first["inputRequests"]
            done = await client.retry("ask_city", first["requestState"], {key: accept(city="Oslo")})
            assert done.text == "city=Oslo"
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(BOUND):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.stderr is not None
    log = (await proc.stderr.read()).decode()
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    listening = [e for e in events if e.get("event") == "listening"]
    assert [e["event_loop"] for e in listening] == [expected], log


async def test_uvloop_asked_for_but_not_installed_is_a_configuration_error(tmp_path: Path) -> None:
    blocker = tmp_path / "blocked" / "uvloop"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed here')\n", encoding="utf-8")
    config = _config(tmp_path, _free_port(), "http://127.0.0.1:9/mcp", "uvloop")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker.parent), os.environ.get("PYTHONPATH", "")])}
    proc = await start_serve(config, env)
    async with asyncio.timeout(BOUND):
        _, err = await proc.communicate()
    assert proc.returncode == 2
    assert err.decode().splitlines() == [
        "mrtr-gateway: invalid configuration:",
        "listen.event_loop: uvloop is not installed: pip install 'mrtr-gateway[uvloop]'",
    ]
