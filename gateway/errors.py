"""Errors the gateway answers with, and the one JSON-RPC error → HTTP status table.

Tree (every exception the gateway raises for a client to hear about; status from the one table)::

    GatewayError                      a JSON-RPC error the client receives (code, message, data)
    ├── _Condition                    -32603 + data.reason/data.cause: the gateway's own conditions
    │   ├── BackendUnavailable        data.reason "backend_unavailable"  HTTP 502
    │   ├── Overloaded                data.reason "overloaded"           HTTP 503 + Retry-After
    │   │   ├── Draining              data.reason "draining"             HTTP 503 + Retry-After
    │   │   ├── TaskLimitReached      a call that would become a task past limits.max_tasks* (its own cause)
    │   │   └── TaskOwnerUnavailable  tasks/* for a task whose owner replica did not answer, not provably gone
    │   ├── HoldLost                  data.reason "hold_lost"            HTTP 502
    │   │   └── HoldLimitReached      a call past max_rounds or its absolute deadline (its own cause)
    │   └── AlreadyAnswered           data.reason "already_answered"     HTTP 409: a resend whose first
    │                                 answer went out and was not kept (gateway.calls.resends)
    ├── UpstreamError                 the backend's own JSON-RPC error, mapped to a spec code
    │                                 (-32602 400, -32601 404, -32603 200: the backend did answer);
    │                                 also a url-mode interaction the user declined (the backend's
    │                                 -32042 stands) and a listener's refused resources/subscribe
    ├── InvalidRequestState           -32602  HTTP 400  requestState failed to unseal or bind (fixed message)
    ├── InvalidParams                 -32602  HTTP 400
    ├── TaskNotFound                  -32602  HTTP 400  a task id that does not open or names no task here
    │                                                   (one fixed message, whatever the reason)
    ├── MethodNotFound                -32601  HTTP 404  tasks/* on a route without tasks
    └── MissingCapability             -32021  HTTP 400  data.requiredCapabilities

    A task's own failure is no exception: ``failed`` with an error object in ``tasks/get``; the
    gateway's own reasons for it (a lost task) are :data:`TASK_LOST_REASONS` (:func:`task_lost`).

    Rejection (gateway.frontdoor.classify)   a value, not an exception: decided before any I/O; its
                                              status comes from the same table, and only the code-less
                                              HTTP refusals (405, 406, 408, 413, 415) carry their own.

Internal signals that never reach a client as themselves, and what they become::

    StateError (state.codec), RefusedHold (holds.registry)   → InvalidRequestState (state.boundary)
    MalformedInputResponse (translate.inputs), InvalidCursor  → InvalidParams
    TaskIdRejected (mcptasks.ids), a task not in the table      → TaskNotFound
    MemoryFull (bounded)                                       → Overloaded
    SessionExpired (legacy.session)                            → one re-initialization, else BackendUnavailable
    Refused (auth.verify)                                      → HTTP 401/403 from the route's auth gate
    BodyTooLarge, BodyTimeout (frontdoor.body)                 → HTTP 413, 408
    aiohttp errors, timeouts (http_errors: the one mapping)    → BackendUnavailable; HoldLost on a replica hop

Codes. The 2026-07-28 revision (basic/index.mdx §Error Codes) closes -32000..-32019 as a legacy
band ("new implementations SHOULD NOT use codes from this sub-range at all"), reserves
-32020..-32099 for codes the specification defines, and asks for new purposes to be allocated
outside -32768..-32000. The gateway's own conditions are therefore all the standard
``-32603 Internal error`` with a machine-readable ``data.reason`` (:data:`BACKEND_UNAVAILABLE`,
:data:`OVERLOADED`, :data:`HOLD_LOST`, :data:`DRAINING`) and, where useful, ``data.cause`` (the finer reason the
metrics and logs use, e.g. ``timeout``). Clients branch on ``data.reason``; the message is fixed.

HTTP status. The specification fixes 400 for -32700/-32600/-32602/-32020/-32021/-32022
(basic/index.mdx §_meta, transports/streamable-http.mdx), and the SDKs answer -32601 with 404.
It is silent on -32603. The gateway's own conditions are never the client's fault, so they get a
5xx: 502 when something behind the gateway failed (the backend, or the replica that held the
exchange), 503 + ``Retry-After`` when the gateway is at capacity. Any other -32603, and every
error a backend answered itself (relayed as :class:`UpstreamError`), travels with HTTP 200 as in
the SDKs: the backend did answer, and its error is the JSON-RPC payload. :func:`http_status_for`
is the one place that decides; every path (modern requests, old-client passthrough, forwarded
retries) renders through it, so one condition has one code and one status everywhere.

Client-side validation failures are :class:`gateway.frontdoor.classify.Rejection` values, not
exceptions: they are decided before any I/O, and their status comes from :func:`http_status_for` too.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from mcp_types import jsonrpc

BACKEND_UNAVAILABLE: Final = "backend_unavailable"
"""``data.reason``: the legacy server refused, timed out, failed (5xx) or answered garbage, or the
gateway's credential for it could not be had (``data.cause`` :data:`BACKEND_AUTH`)."""
BACKEND_AUTH: Final = "backend_auth"
"""``data.cause`` of :data:`BACKEND_UNAVAILABLE` when ``backend.auth`` failed (the detail is only logged)."""
OVERLOADED: Final = "overloaded"
"""``data.reason``: a capacity bound was reached (holds, backend sessions, or ``data.cause``
``max_connections``: the connection cap, :mod:`gateway.connections`); retry later."""
HOLD_LOST: Final = "hold_lost"
"""``data.reason``: the exchange a requestState names is gone; start the call again."""
DRAINING: Final = "draining"
"""``data.reason``: this replica is shutting down and takes no new calls; retry (another replica will)."""
ALREADY_ANSWERED: Final = "already_answered"
"""``data.reason``: a resend of a retry whose first send was answered, and that answer was not kept
(over ``limits.resend_answer_max_bytes``, or out of the resend memory); start the call again."""

BACKEND_CAUSES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "connect_failed": "no connection to the backend",
        "timeout": "no answer within backend.timeout (or a stdio server that does not read its stdin)",
        "bad_status": "an HTTP status the transport cannot use (5xx, 4xx other than a lost session)",
        "malformed_response": "a body or event that is not JSON-RPC, not UTF-8, too deep or too large",
        "stream_closed": "the backend closed the stream, the SSE connection or its stdout before answering",
        "stream_broken": "the response body broke off mid-transfer",
        "transport_error": "any other HTTP client failure",
        "session_lost": "the backend expired a session the gateway had just re-initialized",
        "initialize_failed": "the backend refused the initialize handshake",
        "unsupported_version": "the backend chose a protocol version the gateway does not speak",
        "endpoint_cross_origin": "an HTTP+SSE endpoint event naming another origin",
        "redirect_refused": "a redirect to another origin",
        "spawn_failed": "a stdio server that cannot be started or exits before initialize",
        "backend_flood": "a backend past its backend.limits",
        BACKEND_AUTH: "the gateway's own credential for the backend could not be had (backend.auth)",
    }
)
"""Every ``data.cause`` of :class:`BackendUnavailable`: the one table of backend failure causes. The
``reason`` label of ``mrtr_gateway_backend_errors_total`` takes these values, and every route's
series are created at 0 from it when the route is built
(:meth:`gateway.observability.metrics.registry.Metrics.route_built`); ``tests/unit/test_metric_label_sets.py``
checks that every cause raised anywhere in ``gateway/`` is in it."""

TASK_LOST: Final = "Task lost"
"""``error.message`` of a task the gateway itself ended ``failed`` (:func:`task_lost`)."""
TASK_LOST_REASONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "ttl_elapsed": "the task was still running when its tasks.ttl had passed",
        "backend_gone": "the backend session failed, or went silent past the task's ttl",
        "result_too_large": "the result was larger than tasks.max_result_bytes, or than limits.max_task_result_bytes "
        "could keep",
        "owner_gone": "the replica that ran the task is gone: no connection to its address, another replica "
        "answers there, or it restarted (read by any other replica)",
        "replica_stopped": "the replica that ran the task stopped while the task was still running (its drain was "
        "over)",
    }
)
"""Every ``error.data.reason`` of a task the gateway ended ``failed`` itself (docs/conformance.md A6)."""

_CODE_STATUS: Final[Mapping[int, int]] = MappingProxyType(
    {
        jsonrpc.PARSE_ERROR: 400,
        jsonrpc.INVALID_REQUEST: 400,
        jsonrpc.INVALID_PARAMS: 400,
        jsonrpc.METHOD_NOT_FOUND: 404,
        jsonrpc.HEADER_MISMATCH: 400,
        jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
        jsonrpc.UNSUPPORTED_PROTOCOL_VERSION: 400,
    }
)
_REASON_STATUS: Final[Mapping[str, int]] = MappingProxyType(
    {
        BACKEND_UNAVAILABLE: 502,
        OVERLOADED: 503,
        HOLD_LOST: 502,
        DRAINING: 503,
        ALREADY_ANSWERED: 409,
    }
)
HTTP_STATUS_FOR_CODE: Final = _CODE_STATUS
"""The spec's codes → HTTP status; -32603 is decided by ``data.reason`` (:func:`http_status_for`)."""


def http_status_for(code: int, reason: str | None = None) -> int:
    """The HTTP status of a JSON-RPC error with ``code`` and ``data.reason``.

    A ``reason`` only counts for -32603: a relayed backend error never borrows a gateway status.
    """
    if code == jsonrpc.INTERNAL_ERROR and reason is not None:
        return _REASON_STATUS.get(reason, 200)
    return _CODE_STATUS.get(code, 200)


class GatewayError(Exception):
    """An error answered to the client as a JSON-RPC error object."""

    code: int = jsonrpc.INTERNAL_ERROR
    message: str = "Internal error"
    category: str | None = None
    """``data.reason`` of the gateway's own conditions; decides the HTTP status."""

    def __init__(self, message: str | None = None, *, data: Any = None, reason: str = "") -> None:
        self.message = message or type(self).message
        self.data = data
        self.reason = reason or type(self).__name__
        super().__init__(self.message)

    @property
    def http_status(self) -> int:
        return http_status_for(self.code, self.category)

    def to_error(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class _Condition(GatewayError):
    """One of the gateway's own conditions: -32603 with ``data.reason`` and ``data.cause``."""

    def __init__(self, cause: str, **extra: Any) -> None:
        super().__init__(data={"reason": self.category, "cause": cause, **extra}, reason=cause)


class BackendUnavailable(_Condition):
    """The backend refused, timed out, failed (5xx) or answered garbage; or (cause ``backend_auth``)
    the gateway could not get its own credential for it (``backend.auth``: token endpoint, secret)."""

    category = BACKEND_UNAVAILABLE
    message = "Backend unavailable"

    def __init__(self, reason: str, detail: str = "") -> None:
        # The detail names backend hosts and errors: it goes to the log, never to the client.
        self.detail = detail[:300]
        super().__init__(reason)


class Overloaded(_Condition):
    category = OVERLOADED
    message = "Gateway is at capacity; retry later"

    def __init__(self, reason: str, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(reason, retryAfter=retry_after)


class Draining(Overloaded):
    """This replica is draining (SIGTERM): a new call is refused so that a live replica takes it;
    retries of calls held here are still served (:mod:`gateway.drain`)."""

    category = DRAINING
    message = "This gateway replica is shutting down; retry the call"

    def __init__(self, retry_after: int) -> None:
        super().__init__("draining", retry_after)


class HoldLost(_Condition):
    """The held exchange is gone or out of reach. ``data.cause``: ``owner_unreachable`` (no
    connection to its replica, or no address), ``owner_unresponsive`` (connected, but the owner did
    not acknowledge the hop within ``replicas.forward_timeout``: stopped or stalled), ``owner_failed``
    (it failed or went silent after acknowledging), or a limit's own cause (:class:`HoldLimitReached`)."""

    category = HOLD_LOST
    message = "The held request is no longer available; start the call again"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)


class HoldLimitReached(HoldLost):
    """A call used up its rounds or its absolute deadline; its hold was ended like an expired one,
    so to the client it is a lost hold (start the call again) with its own ``data.cause``."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(cause)
        self.message = message


class AlreadyAnswered(_Condition):
    """A resend of a retry (same requestState, same inputResponses) whose first send was answered,
    and that answer was not kept for resends: the call went on without this client; start it again.
    HTTP 409: the request conflicts with what the gateway already did, and sending it again cannot help."""

    category = ALREADY_ANSWERED
    message = "This retry was already answered and its answer was not kept; start the call again"

    def __init__(self, cause: str) -> None:
        super().__init__(cause)


class InvalidRequestState(GatewayError):
    code = jsonrpc.INVALID_PARAMS
    message = "Invalid or expired requestState"

    def __init__(self, reason: str) -> None:
        super().__init__(data={"reason": "invalid_request_state"}, reason=reason)


class UpstreamError(GatewayError):
    """The backend answered the call with a JSON-RPC error; relayed with a spec code
    (:func:`gateway.translate.results.modern_error`)."""

    def __init__(self, code: int, message: str, data: Any = None, *, reason: str = "backend_error") -> None:
        super().__init__(message, data=data, reason=reason)
        self.code = code


class InvalidParams(GatewayError):
    code = jsonrpc.INVALID_PARAMS
    message = "Invalid params"


class MissingCapability(GatewayError):
    code = jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY
    message = "Missing required client capability"

    def __init__(self, required: Mapping[str, Any], message: str | None = None) -> None:
        super().__init__(message, data={"requiredCapabilities": dict(required)}, reason="missing_capability")


class TaskNotFound(GatewayError):
    """A ``tasks/*`` request whose task id is unknown, expired, tampered with or another caller's: one
    fixed message for every reason (no oracle); ``reason`` is for the logs and metrics only."""

    code = jsonrpc.INVALID_PARAMS
    message = "Failed to retrieve task: Task not found"

    def __init__(self, reason: str) -> None:
        super().__init__(reason=reason)


class TaskLimitReached(Overloaded):
    """A call that would have become a task, past ``limits.max_tasks`` or ``max_tasks_per_principal``
    (the cause), with no finished task left to evict."""


class TaskOwnerUnavailable(Overloaded):
    """A ``tasks/*`` request for a task another replica owns, which did not answer and is not provably
    gone (cause ``owner_unresponsive``, ``owner_failed``, or ``owner_unknown``: no address to reach it
    at): the task may still be running there, so it is not reported lost; the client polls again."""

    message = "The replica running this task did not answer; retry later"


class MethodNotFound(GatewayError):
    code = jsonrpc.METHOD_NOT_FOUND
    message = "Method not found"

    def __init__(self, reason: str = "method_not_found") -> None:
        super().__init__(reason=reason)


def task_lost(reason: str) -> dict[str, Any]:
    """The error object of a task the gateway ended ``failed`` for ``reason`` (:data:`TASK_LOST_REASONS`)."""
    assert reason in TASK_LOST_REASONS, reason
    return {"code": jsonrpc.INTERNAL_ERROR, "message": TASK_LOST, "data": {"reason": reason}}
