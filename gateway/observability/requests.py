"""One request middleware: per-request log context, one canonical line and one latency observation.

Every HTTP response the gateway writes passes through :func:`request_middleware` — modern calls,
rejections (an Origin 403 included), old clients passed through, retries forwarded from or to
another replica, operational endpoints, and requests whose client went away before the answer. It

* clears structlog's contextvars and binds this request's ``request_id`` (so every line logged while
  the request runs carries it; structlog's contextvars guide);
* gives the handlers a :class:`RequestRecord` (:func:`record_of`) to fill in as they learn what the
  request is and how it ended;
* writes exactly one canonical ``request`` line when the response is done, observes exactly one
  ``mrtr_gateway_request_seconds`` sample and, for a request that reached a route, counts it once in
  ``mrtr_gateway_requests_total`` (:meth:`RequestRecord.counted_as`): the counter and the line are
  read from the same record, so they cannot disagree;
* makes the record the current one while the request runs, so a backend failure is counted at most
  once per client request however many backend requests failed for it (:func:`count_backend_error`).

The line carries: ``request_id``, ``route``, ``rpc_method``, ``target`` (tool or prompt name, or
resource URI, cut to :data:`TARGET_CHARS`), ``outcome`` (``complete``, ``input_required``, ``task``, ``error``
with ``error_code`` and ``reason``, ``rejected``, ``forwarded``, ``legacy_passthrough``, ``listen``,
``notification``, ``client_disconnected``), ``round`` (the request's round trip within its call: 1 for the first
call, k + 1 for a retry whose requestState came from round k) and ``hold`` (a digest of the hold id, the
same on every round of one call, so a call's rounds join up), ``task`` and ``task_status`` (a digest of
the task id a ``tools/call`` was answered with or a ``tasks/*`` request named, and the task's status
after the request: the same digest joins a task's requests), ``replica``, ``status``,
``duration_ms`` and ``backend_status`` when a backend or owner replica answered over HTTP. Never a
credential, a token (requestState included) or an answer: only these fields are written.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from gateway.observability.logging import truncate
from gateway.observability.metrics.labels import OTHER
from gateway.observability.metrics.registry import Metrics

log = structlog.get_logger("gateway.request")

TARGET_CHARS: Final = 128
"""Longest tool name, prompt name or resource URI the line keeps (client-chosen strings)."""
REQUEST_ID_HEADER: Final = "X-Request-Id"
_REQUEST_ID: Final = re.compile(r"[A-Za-z0-9._:-]{1,64}", re.ASCII)
QUIET_PATHS: Final = frozenset({"/healthz", "/readyz", "/metrics"})
"""Probes and scrapes: their line is written at debug level, so they do not flood the info log."""
CLIENT_CLOSED_REQUEST: Final = 499
"""The status the line shows for a request whose client went away before the answer (nginx's)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def task_digest(task_id: str) -> str:
    """A short digest of a task id (a bearer token): joins a task's requests without naming the task."""
    return hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def hold_digest(hold_id: str) -> str:
    """A short digest of a hold id: joins a call's rounds in the logs without naming the hold."""
    return hashlib.sha256(hold_id.encode()).hexdigest()[:16]


@dataclass(eq=False)
class RequestRecord:
    """What the canonical line says about one request; handlers fill it in as they learn."""

    request_id: str
    route: str = "-"
    rpc_method: str = "-"
    target: str | None = None
    outcome: str | None = None
    error_code: int | None = None
    reason: str | None = None
    round: int | None = None
    hold: str | None = None
    backend_status: int | None = None
    era: str | None = None
    task: str | None = None
    task_status: str | None = None
    forwarded: bool = False
    backend_failed: bool = False
    """A backend failure of this request was counted in ``backend_errors_total`` (never logged)."""

    def call(self, route: str, method: str, target: str | None = None) -> None:
        self.route, self.rpc_method = route, method
        self.target = truncate(target, TARGET_CHARS) if target else None

    def held(self, hold_id: str, round_: int) -> None:
        self.hold, self.round = hold_digest(hold_id), round_

    def tasked(self, task_id: str, status: str) -> None:
        """The request made or named the task ``task_id`` (only its digest is kept), now ``status``."""
        self.task, self.task_status = task_digest(task_id), status

    def failed(self, code: int | None, reason: str) -> None:
        self.outcome, self.error_code, self.reason = "error", code, reason

    def counted_as(self) -> str | None:
        """The ``outcome`` label of ``requests_total`` for this request: an error carries its reason
        (``error:<reason>``, as the line's ``reason``); None for a request that reached no route or
        whose client went away before it was answered (the latency histogram still has it)."""
        if self.route == "-" or self.outcome is None or self.outcome == "client_disconnected":
            return None
        if self.outcome == "error":
            return f"error:{self.reason or 'internal_error'}"[:60]
        return self.outcome

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request_id": self.request_id, "route": self.route, "rpc_method": self.rpc_method}
        optional = {
            "target": self.target,
            "outcome": self.outcome,
            "error_code": self.error_code,
            "reason": self.reason,
            "round": self.round,
            "hold": self.hold,
            "task": self.task,
            "task_status": self.task_status,
            "backend_status": self.backend_status,
            "era": self.era,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        if self.forwarded:
            out["forwarded"] = True
        return out


RECORD: Final = web.RequestKey("request_record", RequestRecord)
_CURRENT: Final[ContextVar[RequestRecord | None]] = ContextVar("mrtr_gateway_request_record", default=None)
"""The record of the client request being served (set by the middleware; tasks it starts inherit it)."""


def count_backend_error(metrics: Metrics, route: str, reason: str) -> None:
    """Count a backend failure in ``mrtr_gateway_backend_errors_total``, once per client request.

    One client request may meet the same dead backend several times: a ``tools/call`` first looks up
    the tool's input schema (a ``tools/list``), then makes the call; a failed call may list the
    backend's catalogue. Counting each would make ``backend_errors / requests`` read 200 % on a dead
    route and the ``BackendUnavailable`` alert fire at half its threshold. The first failure of a request
    is counted, under its reason; later ones are not (background work a request started, such as
    cancelling its abandoned call, inherits its record). Work that belongs to no client request
    (answering a hold the reaper expired) counts each failure."""
    record = _CURRENT.get()
    if record is not None:
        if record.backend_failed:
            return
        record.backend_failed = True
    metrics.backend_errors.labels(route, reason).inc()


def record_of(request: web.Request) -> RequestRecord:
    """This request's record (a detached one outside the middleware, e.g. in a unit test)."""
    record = request.get(RECORD)
    if record is None:
        record = request[RECORD] = RequestRecord(request_id=_request_id(request))
    return record


class FreshIds:
    """Fresh request ids: 16 hex characters of ``os.urandom``, as ``secrets.token_hex(8)`` makes them,
    but drawn :data:`BATCH` bytes at a time, so most requests cost no system call. A forked child
    starts with a batch of its own (no two processes hand out the same ids)."""

    BATCH: Final = 4096

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0
        os.register_at_fork(after_in_child=self.forget)

    def forget(self) -> None:
        self._pool, self._at = b"", 0

    def __call__(self) -> str:
        if self._at + 8 > len(self._pool):
            self._pool, self._at = os.urandom(self.BATCH), 0
        start = self._at
        self._at = start + 8
        return self._pool[start : start + 8].hex()


fresh_id: Final = FreshIds()


def _request_id(request: web.Request) -> str:
    """The client's ``X-Request-Id`` when it is a short plain token, else a fresh one."""
    given = request.headers.get(REQUEST_ID_HEADER, "")
    return given if _REQUEST_ID.fullmatch(given) else fresh_id()


def request_middleware(metrics: Metrics, replica: str) -> Middleware:
    """The middleware of one app; ``replica`` is this replica's id, written on every line."""

    @web.middleware
    async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
        structlog.contextvars.clear_contextvars()
        record = RequestRecord(request_id=_request_id(request))
        request[RECORD] = record
        current = _CURRENT.set(record)
        structlog.contextvars.bind_contextvars(request_id=record.request_id)
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        except (asyncio.CancelledError, ConnectionError):
            status = CLIENT_CLOSED_REQUEST
            record.outcome = "client_disconnected"
            raise
        except Exception:
            record.outcome = record.outcome or "error"
            raise
        finally:
            elapsed = time.perf_counter() - started
            metrics.request_seconds.labels(record.route, record.rpc_method, record.outcome or OTHER).observe(elapsed)
            if (counted := record.counted_as()) is not None:
                metrics.requests.labels(record.route, record.rpc_method, counted).inc()
            level = log.debug if request.path in QUIET_PATHS else log.info
            level(
                "request",
                **record.fields(),
                replica=replica,
                http_method=request.method,
                status=status,
                duration_ms=round(elapsed * 1000, 2),
            )
            structlog.contextvars.clear_contextvars()
            _CURRENT.reset(current)

    return observe
