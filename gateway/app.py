"""build_app(settings): the aiohttp application with its routes, middleware and owned resources.

Everything the route handlers use is built here, once, into one :class:`FrontDoor` they are handed
(no handler looks services up in ``request.app``). What exists only while the app runs — the HTTP
client, the routes' session pools, the background task groups and the periodic reapers — belongs to
a cleanup context that creates it, yields, then cancels and awaits it.

Shutdown, in order (aiohttp runs cleanup contexts in reverse order of registration):

1. stop accepting requests (aiohttp's runner closes the listening sockets first);
2. end every ``subscriptions/listen`` stream with its final result, and old clients' streams at
   their next quiet moment (``on_shutdown``);
3. stop re-reading key files;
4. end the tasks still running ``failed`` (``replica_stopped``; their backend work is cancelled in
   the background group), then
   expire every hold: pending backend elicitations get ``cancel``, other requests an error, so
   legacy tools finish instead of hanging (the expiries are awaited);
5. close every backend session with ``DELETE`` (the session reaper and the stdio memory guard stop first);
6. cancel and await what is still running in the background (cancellations of abandoned calls,
   closes of dead sessions);
7. close the outgoing HTTP client.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable

import aiohttp
from aiohttp import web

from gateway import keys, ops
from gateway.auth.gate import AuthGates, metadata_handler
from gateway.backend_auth.credentials import RouteCredentials, check_secrets
from gateway.bounded import LruTtlCache
from gateway.calls.backend import Backend
from gateway.calls.context import CallContext
from gateway.calls.core import CallCore
from gateway.calls.replayer import Replayer
from gateway.calls.resends import Resends
from gateway.calls.route import TOOL_SCHEMA_TTL, RouteRuntime
from gateway.calls.schemas import ToolSchemas
from gateway.calls.transcript import ReplayGuard
from gateway.config.load import Settings
from gateway.connections import ConnectionActivity
from gateway.drain import Drain
from gateway.errors import BACKEND_CAUSES
from gateway.frontdoor.door import FrontDoor
from gateway.frontdoor.handler import make_handler
from gateway.frontdoor.legacy_ids import LegacySessionIds
from gateway.frontdoor.origin import OriginPolicy
from gateway.holds.registry import HoldRegistry
from gateway.key_reload import KeyFileWatcher
from gateway.keyset import KeySet
from gateway.legacy.memory import CHECK_EVERY, KILL_REASONS, Reading, StdioMemoryGuard, cgroup_root
from gateway.legacy.pool import SessionPool
from gateway.legacy.session import JsonObj
from gateway.legacy.starts import StartBudget
from gateway.listen.hub import ListenHubs
from gateway.mcptasks.ids import TaskIds
from gateway.mcptasks.passthrough import LegacyTasks
from gateway.mcptasks.service import TaskService
from gateway.mcptasks.table import TaskTable
from gateway.observability.loop_lag import loop_lag_context
from gateway.observability.metrics.registry import Metrics
from gateway.observability.requests import request_middleware
from gateway.observability.route_health import RouteHealthCollector
from gateway.replicas.auth import ForwardSigner
from gateway.replicas.forward import ReplicaHop, hop_client
from gateway.server import handler_options
from gateway.state.boundary import RequestStateBoundary
from gateway.state.codec import KeyRing
from gateway.tasks import TaskGroup
from gateway.translate.cursors import Cursors

REAP_INTERVAL = 1.0


def build_app(settings: Settings) -> web.Application:
    config = settings.config
    metrics = Metrics.create()
    # One drain state for the server (begins it on SIGTERM), /readyz and the front door (refuses new calls).
    drain = Drain(config.listen.drain_timeout, on_refuse=metrics.rejections.labels("draining").inc)
    # What each connection is doing, for the connection cap (gateway.connections), seen from here.
    connections = ConnectionActivity()
    # handler_args bound what the HTTP parser accepts wherever the app runs (issue 8 item 4).
    app = web.Application(
        client_max_size=config.listen.max_body_bytes + 1,
        handler_args=handler_options(config.listen),
        middlewares=[connections.middleware, request_middleware(metrics, settings.replica_id), drain.middleware],
    )
    app[keys.CONNECTIONS] = connections
    app[keys.SETTINGS] = settings
    app[keys.METRICS] = metrics
    app[keys.DRAIN] = drain
    app[keys.READY] = {"routes": False}
    app[keys.BACKGROUND] = TaskGroup("background")
    app[keys.MCP_TASKS] = TaskGroup("mcp-tasks")
    check_secrets(config.routes)  # an unreadable backend secret is a configuration error, named by its path
    door = app[keys.DOOR] = _front_door(app, settings, metrics)
    app[keys.ROUTES] = door.routes
    app[keys.LISTEN_HUBS] = door.hubs
    app[keys.FORWARD_SIGNER] = door.signer
    app.on_shutdown.append(_close_long_streams)
    app.router.add_get("/healthz", ops.healthz)
    app.router.add_get("/readyz", ops.readyz)
    if config.listen.metrics_port is None:  # else gateway.server serves it on its own port
        app.router.add_get("/metrics", ops.metrics_handler(metrics.registry))
    for path, document in door.auth.metadata_paths().items():
        app.router.add_get(path, metadata_handler(document))
    for route in config.routes:
        handler = make_handler(door, route.path)
        for method in ("POST", "GET", "DELETE", "PUT", "PATCH"):
            app.router.add_route(method, route.path, handler)
    app.cleanup_ctx.append(_http_client)
    app.cleanup_ctx.append(_background_tasks)
    app.cleanup_ctx.append(_routes)
    app.cleanup_ctx.append(_holds)
    app.cleanup_ctx.append(_mcp_tasks)
    app.cleanup_ctx.append(_state_keys_reload)
    app.cleanup_ctx.append(loop_lag_context(metrics.loop_lag.observe))
    return app


def _resends(app: web.Application, settings: Settings, metrics: Metrics) -> Resends:
    """The answers kept for resends of retries (:mod:`gateway.calls.resends`); runs the retries in
    the background group, so a client that goes away does not abandon its retry."""
    limits = settings.config.limits
    return Resends(
        group=app[keys.BACKGROUND],
        metrics=metrics,
        max_entries=limits.resend_memory_entries,
        max_bytes=limits.resend_memory_bytes,
        max_answer_bytes=limits.resend_answer_max_bytes,
    )


def _front_door(app: web.Application, settings: Settings, metrics: Metrics) -> FrontDoor:
    """The core (boundary, holds, call core) and every collaborator of the route handlers."""
    config = settings.config
    limits = config.limits

    def http() -> aiohttp.ClientSession:
        return app[keys.HTTP_CLIENT]

    state_keys = KeySet(settings.state_keys)  # every token format asks it for its keys; a reload replaces it
    keyring = app[keys.KEYRING] = KeyRing(state_keys, seal_version=config.state.seal_version)
    boundary = RequestStateBoundary(
        keyring,
        replica_id=settings.replica_id,
        ttl=config.state.ttl,
        advertise_url=config.replicas.advertise_url,
        count_refusal=lambda reason: metrics.state_rejections.labels(reason).inc(),
    )
    backend = Backend(metrics, app[keys.BACKGROUND])
    drain = app[keys.DRAIN]

    def holds_changed(count: int) -> None:
        metrics.holds.set(count)
        drain.changed()

    registry: HoldRegistry[CallContext] = HoldRegistry(
        max_holds=limits.max_holds,
        max_per_principal=limits.max_holds_per_principal,
        max_anonymous=limits.max_holds_anonymous,
        retry_after=limits.retry_after,
        on_expire=backend.expire_hold,
        on_change=holds_changed,
        observer=metrics.hold_observer(),
    )
    metrics.live.watch((r.name for r in settings.routes), holds=registry.counts_by_route)
    app[keys.HOLDS] = registry
    replayer = Replayer(
        backend=backend,
        boundary=boundary,
        metrics=metrics,
        guard=ReplayGuard(limits.replay_memory, limits.retry_after),
        state_ttl=config.state.ttl,
    )
    tasks = TaskService(
        ids=TaskIds(state_keys),
        table=TaskTable(
            max_tasks=limits.max_tasks,
            max_per_principal=limits.max_tasks_per_principal,
            max_result_bytes=limits.max_task_result_bytes,
            retry_after=limits.retry_after,
            metrics=metrics,
        ),
        backend=backend,
        metrics=metrics,
        group=app[keys.MCP_TASKS],
        replica_id=settings.replica_id,
        boot=boundary.boot,
        advertise_url=config.replicas.advertise_url,
        principal_tag=boundary.principal,
        draining=lambda: drain.draining,
        retry_after=limits.retry_after,
    )
    # The drain's work: held calls, and the tasks this replica keeps (running ones may still end,
    # ended ones be read): while there are any, a draining replica answers tasks/* to its deadline.
    drain.watch_holds(lambda: len(registry) + len(tasks.table))
    core = CallCore(
        backend=backend,
        registry=registry,
        boundary=boundary,
        metrics=metrics,
        replayer=replayer,
        resends=_resends(app, settings, metrics),
        tasks=LegacyTasks(tasks, backend, lambda: drain.draining),
    )
    signer = ForwardSigner(state_keys)
    return FrontDoor(
        settings=settings,
        metrics=metrics,
        origins=OriginPolicy(config.listen.allowed_origins),
        auth=AuthGates(config.routes, http, _count_refusal(metrics)),
        signer=signer,
        cursors=Cursors(state_keys),
        legacy_ids=LegacySessionIds(state_keys),
        hubs=ListenHubs(
            max_streams=limits.max_listen_streams,
            max_per_principal=limits.max_listen_streams_per_principal,
            retry_after=limits.retry_after,
        ),
        boundary=boundary,
        core=core,
        schemas=ToolSchemas(core.call),
        hop=ReplicaHop(config.replicas, signer, metrics, lambda: app[keys.HOP_CLIENT]),
        drain=drain,
        tasks=tasks,
        http=http,
    )


def _count_refusal(metrics: Metrics) -> Callable[[str, str], None]:
    def count(route: str, reason: str) -> None:
        metrics.auth_refusals.labels(route, reason).inc()

    return count


async def _close_long_streams(app: web.Application) -> None:
    """Long-lived streams end before handlers are awaited: listen streams with their final result,
    passthrough streams of old clients at their next check."""
    door = app[keys.DOOR]
    door.closing = True
    await door.hubs.close_all()


async def _http_client(app: web.Application) -> AsyncIterator[None]:
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, enable_cleanup_closed=True)
    # No cookie jar: one shared client serves every user, and a backend cookie must not leak across them.
    async with (
        aiohttp.ClientSession(connector=connector, auto_decompress=True, cookie_jar=aiohttp.DummyCookieJar()) as http,
        hop_client() as hop,
    ):
        app[keys.HTTP_CLIENT] = http
        app[keys.HOP_CLIENT] = hop  # the replica hop's own: it watches for the owner's acknowledgement
        yield


async def _background_tasks(app: web.Application) -> AsyncIterator[None]:
    """The background group lives while the app runs; whatever is left in it at the end is cancelled
    and awaited, after the holds have been expired and the pools closed: the call core's work that
    outlives a request (cancelling an abandoned call upstream, answering an expired round) runs here."""
    yield
    await app[keys.BACKGROUND].aclose()


async def _routes(app: web.Application) -> AsyncIterator[None]:
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


async def _holds(app: web.Application) -> AsyncIterator[None]:
    registry = app[keys.HOLDS]
    async with _periodic("hold-reaper", REAP_INTERVAL / 4, registry.reap):
        yield
    await registry.close()


async def _mcp_tasks(app: web.Application) -> AsyncIterator[None]:
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


async def _state_keys_reload(app: web.Application) -> AsyncIterator[None]:
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
