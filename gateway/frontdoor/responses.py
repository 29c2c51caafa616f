"""Writing JSON-RPC answers as HTTP responses: the envelope from :mod:`gateway.envelopes`, the
status from the one table in :mod:`gateway.errors` (through :attr:`GatewayError.http_status` and
:attr:`Rejection.http_status`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from gateway import envelopes
from gateway.errors import GatewayError, Overloaded
from gateway.frontdoor.classify import Rejection
from gateway.observability.metrics import Metrics
from gateway.observability.requests import record_of


def json_response(
    message: Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=envelopes.encode(message),
        status=status,
        content_type="application/json",
        headers=dict(headers) if headers else None,
    )


def rejection_response(rejection: Rejection) -> web.Response:
    """A classifier's refusal: a JSON-RPC error, or a bare status for the code-less HTTP refusals."""
    if rejection.code is None:
        return web.Response(status=rejection.http_status, headers=dict(rejection.headers))
    error = envelopes.error_object(rejection.code, rejection.message, rejection.data)
    return json_response(envelopes.error(rejection.id, error), rejection.http_status, rejection.headers)


def error_response(id_: envelopes.RequestId, exc: GatewayError) -> web.Response:
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Overloaded) else None
    return json_response(envelopes.error(id_, exc.to_error()), exc.http_status, headers)


def refuse(metrics: Metrics, request: web.Request, rejection: Rejection) -> web.Response:
    """Answer a front-door refusal, counted by reason and recorded for the canonical line."""
    metrics.rejections.labels(rejection.reason).inc()
    record = record_of(request)
    record.outcome, record.reason, record.error_code = "rejected", rejection.reason, rejection.code
    return rejection_response(rejection)
