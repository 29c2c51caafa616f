"""Writing JSON-RPC answers as HTTP responses: the envelope from :mod:`gateway.envelopes`, the
status from the one table in :mod:`gateway.errors` (through :attr:`GatewayError.http_status` and
:attr:`Rejection.http_status`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from aiohttp import hdrs, web
from aiohttp.abc import AbstractStreamWriter
from multidict import CIMultiDict, CIMultiDictProxy

from gateway import envelopes
from gateway.errors import GatewayError, Overloaded
from gateway.frontdoor.classify import Rejection
from gateway.observability.metrics.registry import Metrics
from gateway.observability.requests import record_of
from gateway.turns import LOOP_HOLD_SECONDS, give_turn


def json_response(
    message: Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> web.StreamResponse:
    return body_response(envelopes.encode(message), status, headers)


WRITE_SLICE_BYTES = 256 * 1024
"""A body larger than this is handed to the socket in slices of this size (:class:`SlicedResponse`)."""


_JSON_ONLY: Final = CIMultiDictProxy(CIMultiDict({hdrs.CONTENT_TYPE: "application/json"}))
"""The headers of most answers, built once (aiohttp copies them into each response)."""


def body_response(body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> web.StreamResponse:
    """An encoded JSON-RPC message as the HTTP response (what :func:`json_response` writes)."""
    if len(body) > WRITE_SLICE_BYTES:
        return SlicedResponse(body, status, headers)
    return plain_response(body, status, headers)


def plain_response(body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """An encoded JSON-RPC message known to be small (a refusal), written in one step."""
    if not headers:
        return web.Response(body=body, status=status, headers=_JSON_ONLY)
    return web.Response(body=body, status=status, content_type="application/json", headers=dict(headers))


class SlicedResponse(web.StreamResponse):
    """A large JSON body written in slices: the status, headers (``Content-Length`` included) and
    bytes ``web.Response`` would write, as several steps of the event loop instead of one.

    ``web.Response`` hands its whole body to the transport in one step: a 4 MiB answer holds the
    loop for as long as it takes to copy, and every other request (``/healthz``) waits for it.
    Here :meth:`prepare` sends the headers, then each slice (a view, not a copy) is one ``write``,
    which waits whenever the transport's buffer is full (aiohttp's flow control), followed by a
    turn of the loop (:func:`~gateway.turns.give_turn`), so a request that arrived meanwhile waits
    for one slice at most. aiohttp ends the response (``write_eof``) once the handler's answer is
    prepared.
    """

    def __init__(self, body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status=status, headers=headers)
        self.headers[hdrs.CONTENT_TYPE] = "application/json"
        self.content_length = len(body)
        self._unwritten: bytes | None = body

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        writer = await super().prepare(request)
        body, self._unwritten = self._unwritten, None  # written once, however often prepare is called
        if body is None or request.method == hdrs.METH_HEAD:  # a HEAD answer carries no body
            return writer
        view = memoryview(body)
        for offset in range(0, len(view), WRITE_SLICE_BYTES):
            await self.write(view[offset : offset + WRITE_SLICE_BYTES])
            await give_turn()  # what arrived while the slice was copied is read before the next
        return writer


async def encoded(message: Mapping[str, Any]) -> bytes:
    """``message`` encoded (:func:`gateway.envelopes.encode`), then, if that held the event loop past
    :data:`~gateway.turns.LOOP_HOLD_SECONDS`, a turn of the loop (:func:`~gateway.turns.give_turn`)
    before the caller writes it.

    A multi-MiB result takes milliseconds to encode (4 MiB: about 3 ms) and as long again to hand
    to the socket; with the turn between them other requests (``/healthz``) wait for one of the two,
    never for both. A small answer costs two clock reads and no turn.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    body = envelopes.encode(message)
    if loop.time() - started > LOOP_HOLD_SECONDS:
        await give_turn()
    return body


def rejection_response(rejection: Rejection) -> web.Response:
    """A classifier's refusal: a JSON-RPC error, or a bare status for the code-less HTTP refusals."""
    if rejection.code is None:
        return web.Response(status=rejection.http_status, headers=dict(rejection.headers))
    error = envelopes.error_object(rejection.code, rejection.message, rejection.data)
    return plain_response(
        envelopes.encode(envelopes.error(rejection.id, error)), rejection.http_status, rejection.headers
    )


def error_response(id_: envelopes.RequestId, exc: GatewayError) -> web.StreamResponse:
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Overloaded) else None
    return json_response(envelopes.error(id_, exc.to_error()), exc.http_status, headers)


def refuse(metrics: Metrics, request: web.Request, rejection: Rejection) -> web.Response:
    """Answer a front-door refusal, counted by reason and recorded for the canonical line."""
    metrics.rejections.labels(rejection.reason).inc()
    record = record_of(request)
    record.outcome, record.reason, record.error_code = "rejected", rejection.reason, rejection.code
    return rejection_response(rejection)
