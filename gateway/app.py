"""build_app(settings): the aiohttp application with its routes, middlewares and owned resources.

Shutdown, in order (aiohttp runs cleanup contexts in reverse order of registration):

1. stop accepting requests (aiohttp's runner closes the listening sockets first);
2. end every ``subscriptions/listen`` stream with its final result (``on_shutdown``);
3. expire every hold: pending backend elicitations get ``cancel``, other requests an error, so
   legacy tools finish instead of hanging;
4. close every backend session with ``DELETE``;
5. close the outgoing HTTP client.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence

import aiohttp
from aiohttp import web

from gateway import keys, ops
from gateway.auth import AuthGates, metadata_handler
from gateway.bounded import LruTtlCache
from gateway.calls import CallDriver, RouteRuntime
from gateway.calls.context import TOOL_SCHEMA_TTL
from gateway.calls.replay import ReplayGuard
from gateway.config.load import Settings
from gateway.drain import Drain
from gateway.frontdoor.handler import make_handler
from gateway.frontdoor.legacy_passthrough import PassthroughSessions
from gateway.frontdoor.origin import OriginPolicy
from gateway.holds.registry import Hold, HoldRegistry
from gateway.legacy.pool import SessionPool
from gateway.legacy.session import JsonObj
from gateway.listen import ListenHubs
from gateway.observability.loop_lag import loop_lag_context
from gateway.observability.metrics import Metrics
from gateway.replicas.auth import ForwardSigner
from gateway.server import handler_options
from gateway.state.codec import KeyRing
from gateway.state.reload import KeyFileWatcher
from gateway.translate.cursors import Cursors

REAP_INTERVAL = 1.0


def build_app(settings: Settings) -> web.Application:
    config = settings.config
    # handler_args bound what the HTTP parser accepts wherever the app runs (issue 8 item 4).
    app = web.Application(client_max_size=config.listen.max_body_bytes + 1, handler_args=handler_options(config.listen))
    app[keys.SETTINGS] = settings
    app[keys.METRICS] = metrics = Metrics.create()
    # One drain state for the server (begins it on SIGTERM), /readyz and the front door (refuses new calls).
    app[keys.DRAIN] = drain = Drain(config.listen.drain_timeout, on_refuse=metrics.rejections.labels("draining").inc)
    app.middlewares.append(drain.middleware)
    app[keys.READY] = {"routes": False}
    app[keys.ROUTES] = {}
    limits = config.limits
    app[keys.LISTEN_HUBS] = ListenHubs(
        max_streams=limits.max_listen_streams,
        max_per_principal=limits.max_listen_streams_per_principal,
        retry_after=limits.retry_after,
    )
    app[keys.FORWARD_SIGNER] = ForwardSigner(settings.state_keys)
    app[keys.ORIGINS] = OriginPolicy(config.listen.allowed_origins)
    app[keys.CURSORS] = Cursors(settings.state_keys)
    app[keys.AUTH] = gates = AuthGates(config.routes, lambda: app[keys.HTTP_CLIENT], _count_refusal(app))
    app[keys.KEYRING] = KeyRing(settings.state_keys)
    app.on_shutdown.append(_close_listen_streams)
    app.router.add_get("/healthz", ops.healthz)
    app.router.add_get("/readyz", ops.readyz)
    if config.listen.metrics_port is None:  # else gateway.server serves it on its own port
        app.router.add_get("/metrics", ops.metrics_handler(metrics.registry))
    for path, document in gates.metadata_paths().items():
        app.router.add_get(path, metadata_handler(document))
    for route in config.routes:
        handler = make_handler(route.path)
        for method in ("POST", "GET", "DELETE", "PUT", "PATCH"):
            app.router.add_route(method, route.path, handler)
    app.cleanup_ctx.append(_http_client)
    app.cleanup_ctx.append(_routes)
    app.cleanup_ctx.append(_holds)
    app.cleanup_ctx.append(_state_keys_reload)
    app.cleanup_ctx.append(loop_lag_context)
    return app


def _count_refusal(app: web.Application) -> Callable[[str, str], None]:
    def count(route: str, reason: str) -> None:
        app[keys.METRICS].auth_refusals.labels(route, reason).inc()

    return count


async def _close_listen_streams(app: web.Application) -> None:
    """Long-lived streams end before handlers are awaited: listen streams with their final result,
    passthrough streams of old clients at their next check."""
    app[keys.PASSTHROUGH].closing = True
    await app[keys.LISTEN_HUBS].close_all()


async def _http_client(app: web.Application) -> AsyncIterator[None]:
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, enable_cleanup_closed=True)
    # No cookie jar: one shared client serves every user, and a backend cookie must not leak across them.
    async with aiohttp.ClientSession(
        connector=connector, auto_decompress=True, cookie_jar=aiohttp.DummyCookieJar()
    ) as http:
        app[keys.HTTP_CLIENT] = http
        yield


async def _routes(app: web.Application) -> AsyncIterator[None]:
    settings = app[keys.SETTINGS]
    metrics = app[keys.METRICS]
    http = app[keys.HTTP_CLIENT]

    def sessions_changed(route: str, size: int) -> None:
        metrics.backend_sessions.labels(route).set(size)

    def session_initialized(route: str) -> None:
        metrics.backend_initializations.labels(route).inc()

    for route in settings.routes:
        pool = SessionPool(http, route, on_change=sessions_changed, on_initialize=session_initialized)
        schemas: LruTtlCache[str, dict[str, JsonObj]] = LruTtlCache(
            settings.config.limits.tool_schema_cache_entries, TOOL_SCHEMA_TTL
        )
        runtime = RouteRuntime(route, pool, tool_schemas=schemas)
        app[keys.ROUTES][route.path] = runtime
    app[keys.PASSTHROUGH] = PassthroughSessions(settings.state_keys)
    runtimes = app[keys.ROUTES].values()
    metrics.live.watch(
        (r.config.name for r in runtimes), sessions=lambda: {r.config.name: r.pool.counts_by_state() for r in runtimes}
    )
    app[keys.READY]["routes"] = True
    reaper = asyncio.create_task(_reap_sessions(app), name="session-reaper")
    yield
    app[keys.READY]["routes"] = False
    reaper.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reaper
    await asyncio.gather(*(r.pool.close() for r in app[keys.ROUTES].values()))


async def _reap_sessions(app: web.Application) -> None:
    while True:
        await asyncio.sleep(REAP_INTERVAL)
        for runtime in app[keys.ROUTES].values():
            runtime.pool.reap()


async def _holds(app: web.Application) -> AsyncIterator[None]:
    settings = app[keys.SETTINGS]
    metrics = app[keys.METRICS]
    limits = settings.config.limits
    driver_box: list[CallDriver] = []

    async def on_expire(hold: Hold) -> None:
        await driver_box[0].expire(hold)

    drain = app[keys.DRAIN]

    def holds_changed(count: int) -> None:
        metrics.holds.set(count)
        drain.changed()

    registry = HoldRegistry(
        max_holds=limits.max_holds,
        max_per_principal=limits.max_holds_per_principal,
        max_anonymous=limits.max_holds_anonymous,
        retry_after=limits.retry_after,
        on_expire=on_expire,
        on_change=holds_changed,
        observer=metrics.hold_observer(),
    )
    drain.watch_holds(registry.__len__)
    metrics.live.watch((r.name for r in settings.routes), holds=registry.counts_by_route)
    driver = CallDriver(
        keyring=app[keys.KEYRING],
        registry=registry,
        metrics=metrics,
        replica_id=settings.replica_id,
        advertise_url=settings.config.replicas.advertise_url,
        state_ttl=settings.config.state.ttl,
        replay_guard=ReplayGuard(limits.replay_memory, limits.retry_after),
    )
    driver_box.append(driver)
    app[keys.HOLDS] = registry
    app[keys.DRIVER] = driver
    reaper = asyncio.create_task(_reap_holds(registry), name="hold-reaper")
    yield
    reaper.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reaper
    await registry.close()


async def _state_keys_reload(app: web.Application) -> AsyncIterator[None]:
    """Keys read from state.keys_file are re-read while the gateway runs (see gateway.state.reload)."""
    settings = app[keys.SETTINGS]
    if settings.state_keys_file is None:
        yield
        return
    ring = app[keys.KEYRING]

    def apply(secrets: Sequence[bytes]) -> None:
        ring.replace(secrets)  # validates first: raises before anything changed
        app[keys.FORWARD_SIGNER].rekey(secrets)
        app[keys.PASSTHROUGH].rekey(secrets)
        app[keys.CURSORS].rekey(secrets)

    def describe() -> str:
        return ",".join(ring.key_ids)

    watcher = KeyFileWatcher(settings.state_keys_file, settings.state_keys, apply, describe)
    app[keys.KEY_WATCHER] = watcher
    task = asyncio.create_task(watcher.run(settings.config.state.reload_interval), name="state-keys-reload")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _reap_holds(registry: HoldRegistry) -> None:
    while True:
        await asyncio.sleep(REAP_INTERVAL / 4)
        registry.reap()
