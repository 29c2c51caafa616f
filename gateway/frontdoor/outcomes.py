"""The outcomes of the front-door ladder (:func:`gateway.frontdoor.classify.classify`), and the
rejections its rungs build.

One frozen value per outcome: :class:`Accepted` (a valid 2026-07-28 request, envelope unpacked),
:class:`NotificationAccepted`, :class:`LegacyHandshake` and :class:`Rejection` (the first rung that
failed: HTTP status, JSON-RPC code, fixed message, reason label). :func:`invalid_request`,
:func:`invalid_params`, :func:`header_mismatch` and :func:`unsupported_version` build the
rejections the rungs share. Pure: no HTTP framework.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway.errors import http_status_for


@dataclass(frozen=True, slots=True)
class Accepted:
    id: str | int
    method: str
    params: Mapping[str, Any]
    protocol_version: str
    client_capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None
    log_level: str | None
    progress_token: str | int | None
    wants_sse: bool


@dataclass(frozen=True, slots=True)
class NotificationAccepted:
    method: str


@dataclass(frozen=True, slots=True)
class LegacyHandshake:
    """A handshake-era message; the caller decides whether it is served or refused."""

    message: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Rejection:
    """The first rung that failed. Its HTTP status comes from the one table
    (:func:`gateway.errors.http_status_for`); only the code-less HTTP refusals (405, 406, 408,
    413, 415: no JSON-RPC body) carry their own ``status``."""

    code: int | None
    message: str
    reason: str
    id: str | int | None = None
    data: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    status: int | None = None

    @property
    def http_status(self) -> int:
        if self.code is None:
            assert self.status is not None, "a rejection without a JSON-RPC code carries its HTTP status"
            return self.status
        return http_status_for(self.code)


Outcome = Accepted | NotificationAccepted | LegacyHandshake | Rejection


def invalid_request(reason: str, request_id: str | int | None = None) -> Rejection:
    return Rejection(INVALID_REQUEST, "Invalid Request", reason, request_id)


def invalid_params(message: str, reason: str, request_id: str | int, data: Any = None) -> Rejection:
    return Rejection(INVALID_PARAMS, message, reason, request_id, data)


def header_mismatch(message: str, reason: str, request_id: str | int) -> Rejection:
    return Rejection(HEADER_MISMATCH, message, f"header_mismatch.{reason}", request_id)


def unsupported_version(requested: str, request_id: str | int | None) -> Rejection:
    return Rejection(
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        "unsupported_version",
        request_id,
        {"supported": list(MODERN_PROTOCOL_VERSIONS), "requested": requested},
    )
