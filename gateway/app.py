"""build_app(settings): the aiohttp application with its routes, middleware and owned resources.

Everything the route handlers use is built here, once, into one :class:`FrontDoor` they are handed
(no handler looks services up in ``request.app``). What exists only while the app runs — the HTTP
client, the routes' session pools, the background task groups and the periodic reapers — belongs to
a cleanup context that creates it, yields, then cancels and awaits it (:mod:`gateway.app_contexts`).

Shutdown, in order (aiohttp runs cleanup contexts in reverse order of registration):

1. stop accepting requests (aiohttp's runner closes the listening sockets first);
2. end every ``subscriptions/listen`` stream with its final result, and old clients' streams at
   their next quiet moment (``on_shutdown``);
3. stop re-reading key files;
4. end the tasks still running ``failed`` (``replica_stopped``; their backend work is cancelled in
   the background group), then
   expire every hold: pending backend elicitations get ``cancel``, other requests an error, so
   legacy tools finish instead of hanging (the expiries are awaited);
5. let what runs in the background finish, up to ``WIND_DOWN_GRACE`` (the backend work of the calls
   and tasks just given up cancelled upstream, retries under way), then cancel and await the rest;
6. close every backend session with ``DELETE`` (the session reaper and the stdio memory guard stop
   first; each pool's own closes of dead sessions are let finish);
7. close the outgoing HTTP client.

Step 5 comes before step 6 so that a call's ``notifications/cancelled`` reaches its backend session
before that session's ``DELETE`` does; the other way round depended on which task the event loop
ran first.
"""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
from aiohttp import web

from gateway import app_contexts, keys, ops
from gateway.auth.gate import AuthGates, metadata_handler
from gateway.backend_auth.credentials import check_secrets
from gateway.calls.backend import Backend
from gateway.calls.context import CallContext
from gateway.calls.core import CallCore
from gateway.calls.replayer import Replayer
from gateway.calls.resends import Resends
from gateway.calls.schemas import ToolSchemas
from gateway.calls.transcript import ReplayGuard
from gateway.config.load import Settings
from gateway.connections import ConnectionActivity
from gateway.drain import Drain
from gateway.frontdoor.door import FrontDoor
from gateway.frontdoor.handler import make_handler
from gateway.frontdoor.legacy_ids import LegacySessionIds
from gateway.frontdoor.origin import OriginPolicy
from gateway.holds.registry import HoldRegistry
from gateway.keyset import KeySet
from gateway.listen.hub import ListenHubs
from gateway.mcptasks.ids import TaskIds
from gateway.mcptasks.passthrough import AllTasks
from gateway.mcptasks.service import TaskService
from gateway.mcptasks.table import TaskTable
from gateway.observability.loop_lag import loop_lag_context
from gateway.observability.metrics.registry import Metrics
from gateway.observability.requests import request_middleware
from gateway.owned import TaskGroup
from gateway.replicas.auth import ForwardSigner
from gateway.replicas.forward import ReplicaHop
from gateway.server import handler_options
from gateway.state.boundary import RequestStateBoundary
from gateway.state.codec import KeyRing
from gateway.translate.cursors import Cursors


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
    app.cleanup_ctx.append(app_contexts.http_client)
    app.cleanup_ctx.append(app_contexts.route_pools)
    app.cleanup_ctx.append(app_contexts.background_tasks)
    app.cleanup_ctx.append(app_contexts.holds)
    app.cleanup_ctx.append(app_contexts.mcp_tasks)
    app.cleanup_ctx.append(app_contexts.state_keys_reload)
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
    boundary = _boundary(keyring, settings, metrics)
    backend = Backend(metrics, app[keys.BACKGROUND])
    drain = app[keys.DRAIN]
    registry = app[keys.HOLDS] = _hold_registry(settings, metrics, backend, drain)
    replayer = Replayer(
        backend=backend,
        boundary=boundary,
        metrics=metrics,
        guard=ReplayGuard(limits.replay_memory, limits.retry_after),
        state_ttl=config.state.ttl,
    )
    tasks = _task_service(app, settings, metrics, backend, boundary, state_keys)
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
        task_maker=AllTasks(tasks, backend, lambda: drain.draining),
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


def _boundary(keyring: KeyRing, settings: Settings, metrics: Metrics) -> RequestStateBoundary:
    """The request-state boundary: seals and opens what the gateway hands clients, under ``keyring``."""
    config = settings.config
    return RequestStateBoundary(
        keyring,
        replica_id=settings.replica_id,
        ttl=config.state.ttl,
        advertise_url=config.replicas.advertise_url,
        count_refusal=lambda reason: metrics.state_rejections.labels(reason).inc(),
    )


def _hold_registry(settings: Settings, metrics: Metrics, backend: Backend, drain: Drain) -> HoldRegistry[CallContext]:
    """The held calls, bounded by the limits; an expired hold is answered by the backend, and every
    change is counted and told to the drain."""
    limits = settings.config.limits

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
    return registry


def _task_service(
    app: web.Application,
    settings: Settings,
    metrics: Metrics,
    backend: Backend,
    boundary: RequestStateBoundary,
    state_keys: KeySet,
) -> TaskService:
    """The tasks this replica keeps (the ``io.modelcontextprotocol/tasks`` extension), run in the
    ``mcp-tasks`` group."""
    config = settings.config
    limits = config.limits
    drain = app[keys.DRAIN]
    return TaskService(
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
