"""The app's cleanup contexts (:func:`gateway.app.build_app` registers them, in the order of its
shutdown): what exists only while the app runs, created at start-up and cancelled and awaited at
the end.

* :func:`http_client` — the outgoing HTTP client (and the replica hop's own);
* :func:`route_pools` — each route's session pool, credentials and tool schema cache, the session
  reaper and the stdio memory guard; every backend session closed at the end;
* :func:`background_tasks` — the background group's end, before the pools': its work is let finish
  for up to :data:`WIND_DOWN_GRACE`, then what is left is cancelled and awaited;
* :func:`holds` — the hold reaper; every hold expired at the end;
* :func:`mcp_tasks` — the task sweeper; the running tasks end ``failed`` at the end;
* :func:`state_keys_reload` — re-reading the keys of ``state.keys_file``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable

import aiohttp
from aiohttp import web

from gateway import keys
from gateway.backend_auth.credentials import RouteCredentials
from gateway.bounded import LruTtlCache
from gateway.calls.route import TOOL_SCHEMA_TTL, RouteRuntime
from gateway.config.load import Settings
from gateway.errors import BACKEND_CAUSES
from gateway.key_reload import KeyFileWatcher
from gateway.legacy.memory import CHECK_EVERY, KILL_REASONS, Reading, StdioMemoryGuard, cgroup_root
from gateway.legacy.pool import SessionPool
from gateway.legacy.session import JsonObj
from gateway.legacy.starts import StartBudget
from gateway.observability.metrics.registry import Metrics
from gateway.observability.route_health import RouteHealthCollector
from gateway.owned import TaskGroup, finish_then_close
from gateway.replicas.forward import hop_client

REAP_INTERVAL = 1.0
WIND_DOWN_GRACE = 3.0
"""Seconds the background work left at shutdown is let finish before it is cancelled: sending a
call's ``notifications/cancelled`` or an expired round's answers takes a backend round trip; reading
a cancelled call's last words (up to 5 s) is cut short, its session being closed next anyway."""


async def http_client(app: web.Application) -> AsyncIterator[None]:
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, enable_cleanup_closed=True)
    # No cookie jar: one shared client serves every user, and a backend cookie must not leak across them.
    async with (
        aiohttp.ClientSession(connector=connector, auto_decompress=True, cookie_jar=aiohttp.DummyCookieJar()) as http,
        hop_client() as hop,
    ):
        app[keys.HTTP_CLIENT] = http
        app[keys.HOP_CLIENT] = hop  # the replica hop's own: it watches for the owner's acknowledgement
        yield


async def background_tasks(app: web.Application) -> AsyncIterator[None]:
    """The background group lives while the app runs: the call core's work that outlives a request
    (cancelling a call or a task given up upstream, answering an expired round, a retry run to its
    end) runs here. At the end, after the tasks have stopped and the holds have been expired and
    before the pools close, that work is let finish for up to :data:`WIND_DOWN_GRACE`, then what is
    left is cancelled and awaited: a ``notifications/cancelled`` reaches its session before the
    session's ``DELETE``."""
    yield
    await finish_then_close(app[keys.BACKGROUND], WIND_DOWN_GRACE)


async def route_pools(app: web.Application) -> AsyncIterator[None]:
    settings = app[keys.SETTINGS]
    metrics = app[keys.METRICS]
    http = app[keys.HTTP_CLIENT]
    door = app[keys.DOOR]
    routes = door.routes

    def sessions_changed(route: str, size: int) -> None:
        metrics.backend_sessions.labels(route).set(size)

    def session_initialized(route: str) -> None:
        metrics.backend_initializations.labels(route).inc()

    # One budget for every stdio process start of every route (limits.max_process_starts), and the
    # memory guard every start asks first and that watches the processes (gateway.legacy.memory).
    guard = _memory_guard(settings, metrics)
    starts = StartBudget(settings.config.limits.max_process_starts, watch=guard.route)
    for index, route in enumerate(settings.routes):
        credentials = RouteCredentials(route, index, http)
        # Every counter of the route at 0 from the start, so the first burst is a visible increase.
        metrics.route_built(
            route.name,
            backend_causes=BACKEND_CAUSES,
            auth_reasons=door.auth.by_path[route.path].refusal_reasons,
            memory_kill_reasons=KILL_REASONS if route.backend.transport == "stdio" else (),
        )
        metrics.backend_token_passthrough.labels(route.name).set(1 if credentials.mode == "passthrough" else 0)
        pool = SessionPool(
            http,
            route,
            on_change=sessions_changed,
            on_initialize=session_initialized,
            starts=starts,
        )
        pool.prewarm()  # stdio: the route's spare processes start (within max_opening and the budget)
        schemas: LruTtlCache[str, dict[str, JsonObj]] = LruTtlCache(
            settings.config.limits.tool_schema_cache_entries, TOOL_SCHEMA_TTL
        )
        routes[route.path] = RouteRuntime(route, pool, credentials, tool_schemas=schemas)
    runtimes = routes.values()
    metrics.live.watch(
        (r.config.name for r in runtimes), sessions=lambda: {r.config.name: r.pool.counts_by_state() for r in runtimes}
    )
    metrics.registry.register(RouteHealthCollector(lambda: {r.config.name: r.pool.health for r in runtimes}))
    app[keys.READY]["routes"] = True  # /readyz also waits for each stdio route's first process
    stdio = any(route.backend.transport == "stdio" for route in settings.routes)
    async with (
        _periodic("session-reaper", REAP_INTERVAL, lambda: [r.pool.reap() for r in routes.values()]),
        _periodic("stdio-memory-guard", CHECK_EVERY, guard.check) if stdio else contextlib.nullcontext(),
    ):
        yield
        app[keys.READY]["routes"] = False
    await asyncio.gather(*(r.pool.close() for r in routes.values()))


def _memory_guard(settings: Settings, metrics: Metrics) -> StdioMemoryGuard:
    """The stdio memory guard, reporting to the metrics; the cgroup is read from the container's own
    (or ``MRTR_GATEWAY_CGROUP_ROOT``)."""
    limits = settings.config.limits

    def killed(route: str, reason: str) -> None:
        metrics.stdio_memory_kills.labels(route, reason).inc()

    def read(reading: Reading) -> None:
        metrics.container_memory.labels("working_set").set(reading.working_set)
        if reading.limit is not None:
            metrics.container_memory.labels("limit").set(reading.limit)

    return StdioMemoryGuard(
        high=limits.stdio_memory_high,
        kill=limits.stdio_memory_kill,
        retry_after=limits.retry_after,
        root=cgroup_root(os.environ),
        on_kill=killed,
        on_reading=read,
    )


async def holds(app: web.Application) -> AsyncIterator[None]:
    registry = app[keys.HOLDS]
    async with _periodic("hold-reaper", REAP_INTERVAL / 4, registry.reap):
        yield
    await registry.close()


async def mcp_tasks(app: web.Application) -> AsyncIterator[None]:
    """Tasks run in the ``mcp-tasks`` group while the app runs; finished ones are swept every second
    (and a draining replica looks again whether its drain is over). At shutdown the running ones end
    ``failed`` (``replica_stopped``), then their runners are cancelled (their backend work cancelled in
    the background group)."""
    tasks = app[keys.DOOR].tasks
    drain = app[keys.DRAIN]

    def sweep() -> None:
        tasks.sweep()
        if drain.draining:
            drain.changed()

    async with _periodic("task-sweeper", REAP_INTERVAL, sweep):
        yield
    tasks.stop()
    await app[keys.MCP_TASKS].aclose()


async def state_keys_reload(app: web.Application) -> AsyncIterator[None]:
    """Keys read from state.keys_file are re-read while the gateway runs (see gateway.key_reload)."""
    settings = app[keys.SETTINGS]
    if settings.state_keys_file is None:
        yield
        return
    ring = app[keys.KEYRING]

    def describe() -> str:
        return ",".join(ring.key_ids)

    watcher = KeyFileWatcher(settings.state_keys_file, settings.state_keys, ring.keys.replace, describe)
    app[keys.KEY_WATCHER] = watcher
    async with TaskGroup("state-keys-reload") as tasks:
        tasks.spawn(watcher.run(settings.config.state.reload_interval), name="state-keys-reload")
        yield


@contextlib.asynccontextmanager
async def _periodic(name: str, every: float, work: Callable[[], object]) -> AsyncIterator[None]:
    """Run ``work`` every ``every`` seconds while the block runs; cancelled and awaited at its end."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(every)
            work()

    async with TaskGroup(name) as tasks:
        tasks.spawn(loop(), name=name)
        yield
