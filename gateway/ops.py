"""Operational endpoints: /healthz (process alive), /readyz (routes can serve, not draining), /metrics.

``/metrics`` is prometheus_client's own aiohttp handler: it negotiates the exposition format from
``Accept`` (OpenMetrics for a Prometheus that asks for it, the text format otherwise) and lets
aiohttp compress the answer when the scraper accepts gzip, which a large registry needs.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from gateway import keys


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """503 until the routes are loaded and every stdio route with ``prewarm`` has a process that
    answered (or failed to start: one broken route does not take the replica out of service unless
    ``listen.ready_requires_all_routes``), and again from the moment a drain begins (SIGTERM), so
    the load balancer stops sending new calls while held ones finish here. The body lists each
    route's state: ``ok``, ``starting``, or ``backend_failing`` with the last error's reason."""
    app = request.app
    routes = {runtime.name: runtime.pool.health.describe() for runtime in app.get(keys.ROUTES, {}).values()}
    if keys.DRAIN in app and app[keys.DRAIN].draining:
        return web.json_response({"status": "draining", "routes": routes}, status=503)
    states = {entry["state"] for entry in routes.values()}
    blocking = (
        {"starting", "backend_failing"} if app[keys.SETTINGS].config.listen.ready_requires_all_routes else {"starting"}
    )
    ready = app[keys.READY].get("routes", False) and not states & blocking
    status = 200 if ready else 503
    return web.json_response({"status": "ready" if ready else "starting", "routes": routes}, status=status)


def metrics_handler(registry: CollectorRegistry) -> Handler:
    """``GET /metrics`` for ``registry``."""
    return make_aiohttp_handler(registry)
