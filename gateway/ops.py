"""Operational endpoints: /healthz (process alive), /readyz (routes loaded), /metrics (Prometheus)."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway import keys


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    ready = request.app[keys.READY].get("routes", False)
    status = 200 if ready else 503
    return web.json_response({"status": "ready" if ready else "starting"}, status=status)


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[keys.METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
