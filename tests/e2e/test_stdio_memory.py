"""The stdio memory guard (``gateway.legacy.memory``), with real server processes.

* A route's ``backend.max_memory``: a server whose process tree grows past it during a call is
  killed; that call fails as on any server that died (-32603 ``backend_unavailable``,
  ``stream_closed``), and the other routes and the route's next call are served.
* The container's memory, from a cgroup directory the test writes (``MRTR_GATEWAY_CGROUP_ROOT``): at
  ``limits.stdio_memory_high`` a call that needs a new process gets 503 ``overloaded``/``memory_high``
  while calls on running processes go on; at ``stdio_memory_kill`` the largest server is killed.

The peer (``tests/peers/memory_stdio.py``) allocates what a test asks and keeps it.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from harness import BareClient, GatewayHandle, running_gateway, stdio_route
from logged import logged
from waiting import eventually

from gateway import keys
from gateway.legacy import memory, spares

PEER = [sys.executable, str(Path(__file__).resolve().parents[1] / "peers" / "memory_stdio.py")]
BOUND = 30.0
MIB = 1 << 20
LIMIT = 1024 * MIB


def memory_route(name: str, **backend: Any) -> dict[str, Any]:
    return stdio_route(name, f"/{name}", PEER, backend={"prewarm": 0, "timeout": BOUND, **backend})


def pid_of(text: str) -> int:
    found = re.search(r"pid=(\d+)", text)
    assert found is not None, text
    return int(found.group(1))


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


async def metrics_text(http: aiohttp.ClientSession, gateway: GatewayHandle) -> str:
    async with http.get(gateway.url("/metrics")) as resp:
        return await resp.text()


def sample(text: str, kind: str) -> float | None:
    """``mrtr_gateway_container_memory_bytes{kind=...}`` in ``/metrics``."""
    found = re.search(rf'^mrtr_gateway_container_memory_bytes{{kind="{kind}"}} (\S+)$', text, re.MULTILINE)
    return None if found is None else float(found.group(1))


def kills(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str], list[int]]:
    """The route, reason and rss of every ``stdio_server_killed`` line, in order."""
    line = ("stdio_server_killed", "warning")
    routes = logged(monkeypatch, memory.log, line[0], "route", level=line[1])
    reasons = logged(monkeypatch, memory.log, line[0], "reason", level=line[1])
    sizes = logged(monkeypatch, memory.log, line[0], "rss_bytes", level=line[1])
    return routes, reasons, sizes


async def test_a_server_past_its_routes_max_memory_is_killed_and_the_routes_go_on(
    http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    routes, reasons, sizes = kills(monkeypatch)
    config = [memory_route("bounded", max_memory=64 * MIB), memory_route("other")]
    async with running_gateway(config) as gw:
        bounded, other = BareClient(http, gw.url("/bounded")), BareClient(http, gw.url("/other"))
        first = pid_of((await bounded.call_tool("pid")).text)
        # grows to ~150 MiB, then would answer after 20 s: the guard kills it long before
        reply = await asyncio.wait_for(bounded.call_tool("grow", {"mib": 150, "hold": 20}), 15)
        assert reply.status == 502, reply
        assert reply.error["code"] == -32603
        assert reply.error["data"]["reason"] == "backend_unavailable"
        assert reply.error["data"]["cause"] == "stream_closed"
        assert (routes, reasons) == (["bounded"], ["route_max_memory"])
        assert sizes[0] > 64 * MIB
        await eventually(lambda: not alive(first), what="the killed server is gone", timeout=BOUND)
        assert (await other.call_tool("pid")).status == 200, "another route is served"
        again = await bounded.call_tool("pid")
        assert again.status == 200, again
        assert pid_of(again.text) != first, "the route's next call has a new process"
        text = await metrics_text(http, gw)
        assert 'mrtr_gateway_stdio_memory_kills_total{reason="route_max_memory",route="bounded"} 1.0' in text
        assert 'mrtr_gateway_stdio_memory_kills_total{reason="container_memory",route="other"} 0.0' in text


def write_cgroup(root: Path, working_set: int) -> None:
    """A cgroup v2 directory with a 1 GiB limit and ``working_set`` in use (plus inactive file cache)."""
    (root / "memory.max").write_text(f"{LIMIT}\n")
    (root / "memory.current").write_text(f"{working_set + 10 * MIB}\n")
    (root / "memory.stat").write_text(f"anon {working_set}\nactive_file 0\ninactive_file {10 * MIB}\n")


async def test_past_high_no_new_process_starts_and_past_kill_the_largest_server_is_killed(
    http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    routes, reasons, _ = kills(monkeypatch)
    write_cgroup(tmp_path, 100 * MIB)
    monkeypatch.setenv(memory.CGROUP_ROOT_ENV, str(tmp_path))
    config = [memory_route("small"), memory_route("big"), memory_route("fresh")]
    async with running_gateway(config, limits={"retry_after": 3}) as gw:
        small, big = BareClient(http, gw.url("/small")), BareClient(http, gw.url("/big"))
        fresh = BareClient(http, gw.url("/fresh"))
        small_pid = pid_of((await small.call_tool("pid")).text)
        big_pid = pid_of((await big.call_tool("grow", {"mib": 100})).text)

        write_cgroup(tmp_path, int(0.9 * LIMIT))  # past stdio_memory_high (0.85), under kill (0.95)
        refused = await fresh.call_tool("pid")
        assert refused.status == 503, refused
        assert refused.headers["Retry-After"] == "3"
        assert refused.error["data"] == {"reason": "overloaded", "cause": "memory_high", "retryAfter": 3}
        served = await small.call_tool("pid")
        assert (served.status, pid_of(served.text)) == (200, small_pid), "a running process still serves"
        text = await metrics_text(http, gw)
        assert 'outcome="error:memory_high",route="fresh"} 1.0' in text

        async def gauges_read() -> bool:
            text = await metrics_text(http, gw)
            reading = sample(text, "limit"), sample(text, "working_set")
            return reading == (LIMIT, int(0.9 * LIMIT))

        await eventually(gauges_read, what="the guard's reading in /metrics", timeout=BOUND, interval=0.1)
        assert not routes, "nothing is killed under stdio_memory_kill"

        write_cgroup(tmp_path, int(0.97 * LIMIT))  # past stdio_memory_kill
        await eventually(lambda: routes, what="a server killed", timeout=BOUND)
        write_cgroup(tmp_path, 100 * MIB)  # (a real container's working set falls with the kill)
        assert (routes[0], reasons[0]) == ("big", "container_memory"), "the largest server first"
        await eventually(lambda: not alive(big_pid), what="the largest server is gone", timeout=BOUND)
        assert (await fresh.call_tool("pid")).status == 200, "under the bounds again, new processes start"


async def test_spares_wait_while_memory_is_high(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A spare refused for memory is no failure of its server: it is tried again once memory allows."""
    refused = logged(monkeypatch, memory.log, "stdio_memory_high", "starts_refused", level="warning")
    failed = logged(monkeypatch, spares.log, "stdio_spare_failed", "reason", level="warning")
    write_cgroup(tmp_path, int(0.9 * LIMIT))
    monkeypatch.setenv(memory.CGROUP_ROOT_ENV, str(tmp_path))
    async with running_gateway([memory_route("warm", prewarm=1)]) as gw:
        pool = gw.app[keys.ROUTES]["/warm"].pool
        await eventually(lambda: refused, what="the spare's start refused", timeout=BOUND)
        assert refused[0] >= 1
        assert (pool.spare_count, pool.health.state, failed) == (0, "starting", [])
        write_cgroup(tmp_path, 100 * MIB)
        await eventually(lambda: pool.spare_count == 1, what="the spare started", timeout=BOUND)
        assert (pool.health.state, failed) == ("ok", [])
