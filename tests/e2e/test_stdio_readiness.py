"""Issue 20 items 2 and 3: stdio start-up within bounds, and readiness that means "can serve now".

``/readyz`` waits for each stdio route's first process, lists every route's state, and is not failed
by one broken route (unless ``listen.ready_requires_all_routes``); a broken route shows in
``mrtr_gateway_route_ready`` and ``mrtr_gateway_backend_start_failures_total``, and its spares are
retried with a capped, jittered exponential backoff. Starts are bounded per route (``max_opening``)
and across routes (``limits.max_process_starts``).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path
from typing import Any

import aiohttp
from harness import BareClient, running_gateway, stdio_route
from waiting import eventually

from gateway import keys
from gateway.legacy.starts import RESPAWN_CAP, StartBudget, respawn_delay

PEER = Path(__file__).resolve().parents[1] / "peers" / "stubborn_stdio.py"
BOUND = 30
SERVER = [sys.executable, str(PEER)]
BROKEN = [sys.executable, "-c", "import sys; sys.exit('No module named my_mcp_server')"]


async def readyz(http: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, Any]]:
    async with http.get(url) as resp:
        return resp.status, await resp.json()


async def ready_or_settled(http: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, Any]]:
    """/readyz once no route is ``starting`` any more."""

    async def settled() -> tuple[int, dict[str, Any]] | None:
        status, body = await readyz(http, url)
        return (status, body) if all(r["state"] != "starting" for r in body["routes"].values()) else None

    answer: tuple[int, dict[str, Any]] = await eventually(
        settled, what="no route starting any more", timeout=BOUND, interval=0.05
    )
    return answer


def test_respawn_delay_doubles_with_jitter_up_to_a_cap() -> None:
    assert respawn_delay(0) == 0
    assert [respawn_delay(n, lambda: 1.0) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert [respawn_delay(n, lambda: 0.0) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert respawn_delay(50, lambda: 1.0) == RESPAWN_CAP
    assert respawn_delay(10**6, lambda: 0.0) == RESPAWN_CAP / 2


async def test_the_start_budget_bounds_starts_at_once() -> None:
    budget, peak = StartBudget(2), 0

    async def start() -> None:
        nonlocal peak
        async with budget.slot():
            peak = max(peak, budget.in_progress)
            await asyncio.sleep(0.01)  # deliberate: the slot is held while others ask for one

    await asyncio.gather(*(start() for _ in range(10)))
    assert (peak, budget.in_progress) == (2, 0)
    assert StartBudget().limit >= 1, "default: the CPU count"


async def test_readyz_waits_for_each_stdio_route_and_reports_a_broken_one(http: aiohttp.ClientSession) -> None:
    routes = [stdio_route("good", "/good", SERVER), stdio_route("broken", "/broken", BROKEN)]
    async with running_gateway(routes) as gw:
        status, body = await readyz(http, gw.url("/readyz"))
        assert body["routes"]["good"]["state"] in ("starting", "ok")
        if body["routes"]["good"]["state"] == "starting":
            assert status == 503, "not ready before the route's first process answered"
        status, body = await ready_or_settled(http, gw.url("/readyz"))
        assert status == 200, "one broken route does not fail /readyz"
        assert body["routes"]["good"] == {"state": "ok"}
        broken = body["routes"]["broken"]
        assert broken["state"] == "backend_failing"
        assert broken["last_error"] == "spawn_failed"
        assert "my_mcp_server" not in str(body), "no detail (the server's stderr) in /readyz"
        reply = await BareClient(http, gw.url("/good")).call_tool("echo", {"text": "x"})
        assert reply.result["content"][0]["text"] == "echo=x"
        async with http.get(gw.url("/metrics")) as resp:
            text = await resp.text()
        assert 'mrtr_gateway_route_ready{route="good"} 1.0' in text
        assert 'mrtr_gateway_route_ready{route="broken"} 0.0' in text
        assert 'mrtr_gateway_backend_start_failures_total{route="broken"} 1.0' in text
        assert 'mrtr_gateway_backend_start_failures_total{route="good"} 0.0' in text
        # the failing spare is retried after a backoff (a window of 1 s, then 2 s, 4 s ..., jittered
        # over its upper half), not at every reap
        health = gw.app[keys.ROUTES]["/broken"].pool.health
        loop, times = asyncio.get_running_loop(), []
        health._on_failure = lambda reason: times.append(loop.time())
        await eventually(lambda: len(times) >= 3, what="three failed starts", timeout=BOUND, interval=0.02)
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert gaps[0] >= 0.45, gaps
        assert gaps[1] >= 0.95, gaps
        assert health.consecutive_failures == health.failures


async def test_ready_requires_all_routes_makes_a_broken_route_fail_readyz(http: aiohttp.ClientSession) -> None:
    routes = [stdio_route("good", "/good", SERVER), stdio_route("broken", "/broken", BROKEN)]
    async with running_gateway(routes, listen={"ready_requires_all_routes": True}) as gw:
        status, body = await ready_or_settled(http, gw.url("/readyz"))
        assert status == 503
        assert body["status"] == "starting"
        assert body["routes"]["broken"]["state"] == "backend_failing"


async def test_spares_start_within_max_opening_and_the_global_budget(http: aiohttp.ClientSession) -> None:
    """Three routes of prewarm 3, max_opening 1, a budget of 2: never more than 2 starts at once, one
    per route; every route ends with its 3 spares."""
    backend = {"prewarm": 3}
    routes = [stdio_route(f"r{i}", f"/r{i}", SERVER, backend=backend) for i in range(3)]
    async with running_gateway(routes, limits={"max_process_starts": 2}) as gw:
        pools = [runtime.pool for runtime in gw.app[keys.ROUTES].values()]
        budget = pools[0]._starts
        assert budget is not None
        assert budget.limit == 2
        peak_total, peak_route = 0, 0

        def sampled_until_started() -> bool:
            """Samples the starts in progress until every route has its spares."""
            nonlocal peak_total, peak_route
            peak_total = max(peak_total, budget.in_progress)
            peak_route = max(peak_route, *(len(p._spares) - p._spares.ready for p in pools))
            return all(pool.spare_count >= 3 for pool in pools)

        await eventually(sampled_until_started, what="three spares a route", timeout=BOUND, interval=0.005)
        assert peak_total <= 2
        assert peak_route <= 1, "max_opening: one spare of a route being started at a time"
