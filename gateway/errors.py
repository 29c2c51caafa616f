"""Errors the gateway answers with, and the one JSON-RPC code → HTTP status table.

Tree::

    GatewayError                      a JSON-RPC error the client receives (code, message, data)
    ├── BackendUnavailable            -32010  the legacy server failed us; never the client's fault
    ├── Overloaded                    -32011  a hold bound was hit; HTTP 503 + Retry-After
    ├── UpstreamError                 the backend's own JSON-RPC error, relayed (-32002 → -32602)
    ├── HoldLost                      -32012  the exchange a requestState names is gone (expired, replica restarted)
    └── InvalidRequestState           -32602  requestState failed to unseal or bind (fixed message)

Codes -32010..-32012 sit in the implementation-defined band -32000..-32019 that the 2026-07-28
revision leaves to implementations; -32000 and -32001 are avoided because the SDKs use them
internally. Client-side validation failures are :class:`gateway.frontdoor.classify.Rejection`
values, not exceptions: they are decided before any I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mcp_types import jsonrpc

BACKEND_UNAVAILABLE: Final = -32010
OVERLOADED: Final = -32011
HOLD_LOST: Final = -32012

HTTP_STATUS_FOR_CODE: Final[Mapping[int, int]] = {
    jsonrpc.PARSE_ERROR: 400,
    jsonrpc.INVALID_REQUEST: 400,
    jsonrpc.INVALID_PARAMS: 400,
    jsonrpc.METHOD_NOT_FOUND: 404,
    jsonrpc.HEADER_MISMATCH: 400,
    jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    jsonrpc.UNSUPPORTED_PROTOCOL_VERSION: 400,
    OVERLOADED: 503,
}
"""Codes not listed travel with HTTP 200: the JSON-RPC body carries the error, as in the SDKs."""


def http_status_for(code: int) -> int:
    return HTTP_STATUS_FOR_CODE.get(code, 200)


class GatewayError(Exception):
    """An error answered to the client as a JSON-RPC error object."""

    code: int = jsonrpc.INTERNAL_ERROR
    message: str = "Internal error"

    def __init__(self, message: str | None = None, *, data: Any = None, reason: str = "") -> None:
        self.message = message or type(self).message
        self.data = data
        self.reason = reason or type(self).__name__
        super().__init__(self.message)

    def to_error(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class BackendUnavailable(GatewayError):
    """The backend refused, timed out, failed (5xx) or answered garbage."""

    code = BACKEND_UNAVAILABLE
    message = "Backend unavailable"

    def __init__(self, reason: str, detail: str = "") -> None:
        # The detail names backend hosts and errors: it goes to the log, never to the client.
        self.detail = detail[:300]
        super().__init__(data={"reason": reason}, reason=reason)


class Overloaded(GatewayError):
    code = OVERLOADED
    message = "Gateway is at capacity for held requests; retry later"

    def __init__(self, reason: str, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(data={"reason": reason, "retryAfter": retry_after}, reason=reason)


class HoldLost(GatewayError):
    code = HOLD_LOST
    message = "The held request is no longer available; start the call again"

    def __init__(self, reason: str) -> None:
        super().__init__(data={"reason": reason}, reason=reason)


class HoldElsewhere(HoldLost):
    """The hold lives in another replica that can be reached at ``owner_url``: forward the retry.

    Control flow between the driver and the front door; rendered as :class:`HoldLost` only if the
    request cannot be forwarded."""

    def __init__(self, owner_url: str, claims: Any = None) -> None:
        super().__init__("owner_elsewhere")
        self.owner_url = owner_url
        self.claims = claims


class InvalidRequestState(GatewayError):
    code = jsonrpc.INVALID_PARAMS
    message = "Invalid or expired requestState"

    def __init__(self, reason: str) -> None:
        super().__init__(data={"reason": "invalid_request_state"}, reason=reason)


class UpstreamError(GatewayError):
    """The backend answered the call with a JSON-RPC error; relayed with its own code."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message, data=data, reason="backend_error")
        self.code = code


class InvalidParams(GatewayError):
    code = jsonrpc.INVALID_PARAMS
    message = "Invalid params"


class MissingCapability(GatewayError):
    code = jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY
    message = "Missing required client capability"

    def __init__(self, required: Mapping[str, Any], message: str | None = None) -> None:
        super().__init__(message, data={"requiredCapabilities": dict(required)}, reason="missing_capability")
