"""Operational endpoints: /healthz (process alive), /readyz (routes loaded, not draining), /metrics.

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
    """503 until the routes are loaded, and again from the moment a drain begins (SIGTERM), so the
    load balancer stops sending new calls while held ones finish here."""
    app = request.app
    if keys.DRAIN in app and app[keys.DRAIN].draining:
        return web.json_response({"status": "draining"}, status=503)
    ready = app[keys.READY].get("routes", False)
    status = 200 if ready else 503
    return web.json_response({"status": "ready" if ready else "starting"}, status=status)


def metrics_handler(registry: CollectorRegistry) -> Handler:
    """``GET /metrics`` for ``registry``."""
    return make_aiohttp_handler(registry)
