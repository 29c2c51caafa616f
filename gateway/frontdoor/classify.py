"""Classify one HTTP exchange at the 2026-07-28 front door, before anything is sent upstream.

:func:`classify` is pure: it takes the HTTP method, the raw header lines and the body bytes and
returns one frozen outcome. The handler turns that outcome into a response; nothing here knows
about aiohttp, routes or backends.

    Outcome
    ├── Accepted              a valid 2026-07-28 request, envelope unpacked
    ├── NotificationAccepted  an id-less body at a modern version: answer 202, drop it
    ├── LegacyHandshake       a handshake-era message: nothing in it says 2026-07-28 (initialize, no/old version)
    └── Rejection             the first rung that failed: HTTP status, JSON-RPC code, fixed message

The ladder follows the SDK's modern entry (`mcp/server/_streamable_http_modern.py` and
`mcp/shared/inbound.py`) but applies the spec exactly (wire reference §2.1-2.5, §2.9, §3.3).
The first failure wins, and its position in the ladder is part of the contract: a client that
contradicts itself hears -32020 before it hears -32022. Each :class:`Rejection` carries a fixed
client-facing `message` and a short `reason` label for logs and metrics (the outcomes, and the
rejections the rungs share, are :mod:`gateway.frontdoor.outcomes`; they are importable from here).
`Mcp-Param-*` headers need the tool's input schema, so the handler checks them later with
:func:`gateway.frontdoor.headers.check_param_headers`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, cast, get_args

from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    LoggingLevel,
)
from mcp_types.jsonrpc import METHOD_NOT_FOUND, PARSE_ERROR
from mcp_types.methods import CLIENT_REQUESTS, INPUT_REQUIRED_METHODS, validate_client_request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from gateway.frontdoor.headers import decode_header_value, is_field_value, quote_for_message
from gateway.frontdoor.outcomes import (
    Accepted,
    LegacyHandshake,
    NotificationAccepted,
    Outcome,
    Rejection,
    header_mismatch,
    invalid_params,
    invalid_request,
    unsupported_version,
)
from gateway.frontdoor.parsing import (
    NAME_IF_PRESENT,
    TASK_METHODS,
    accepts,
    decode_nested,
    fold,
    id_of,
    is_json_content_type,
    is_request_id,
    summarize,
)
from gateway.frontdoor.shapes import shape_is_known_valid

__all__ = [
    "Accepted",
    "LegacyHandshake",
    "NotificationAccepted",
    "Outcome",
    "Rejection",
    "classify",
]

MODERN_VERSION: Final = MODERN_PROTOCOL_VERSIONS[-1]
MODERN_REQUEST_METHODS: Final[frozenset[str]] = TASK_METHODS | frozenset(
    method for method, version in CLIENT_REQUESTS if version == MODERN_VERSION
)
LOG_LEVELS: Final[frozenset[str]] = frozenset(get_args(LoggingLevel))

# Header names as spelled in messages; lookups use the lowercase form.
_VERSION_HEADER: Final = "MCP-Protocol-Version"
_METHOD_HEADER: Final = "Mcp-Method"
_NAME_HEADER: Final = "Mcp-Name"
_ROUTING_HEADERS: Final = (_VERSION_HEADER, _METHOD_HEADER, _NAME_HEADER)
_NAME_BEARING: Final[Mapping[str, str]] = MappingProxyType(
    {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
)
MAX_NESTING: Final = 64
"""Deepest nesting of arrays and objects accepted in a request body (-32600 beyond it)."""


def classify(
    http_method: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    *,
    max_body_bytes: int,
) -> Outcome:
    """Run the front-door ladder over one HTTP exchange; the first failing rung wins."""
    lines = fold(headers)
    wants_sse = _http_rungs(http_method, lines, body, max_body_bytes)
    if isinstance(wants_sse, Rejection):
        return wants_sse
    message = _message_rungs(body)
    if isinstance(message, Rejection):
        return message
    era = _era_rungs(lines, message)
    if era is not None:
        return era
    envelope = _envelope_rungs(lines, message)
    if isinstance(envelope, Rejection):
        return envelope
    return _request_rungs(message, envelope, wants_sse)


@dataclass(frozen=True, slots=True)
class _Message:
    """A decoded JSON-RPC request or notification object (rungs 5-6 passed)."""

    body: Mapping[str, Any]
    id: str | int | None
    method: str
    params: dict[str, Any]
    meta: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class _Envelope:
    """A modern request's envelope (rungs 9-12 passed)."""

    id: str | int
    version: str
    capabilities: dict[str, Any]


def _http_rungs(http_method: str, lines: Mapping[str, list[str]], body: bytes, max_body_bytes: int) -> Rejection | bool:
    """1-4: HTTP layer; these rejections carry no JSON-RPC body. Passed: whether SSE is acceptable."""
    if http_method != "POST":
        return Rejection(None, "Method Not Allowed", "method_not_allowed", headers={"Allow": "POST"}, status=405)
    wants_json, wants_sse = accepts(lines.get("accept", []))
    if not wants_json:
        return Rejection(None, "Not Acceptable", "not_acceptable", status=406)
    if not is_json_content_type(lines.get("content-type", [])):
        return Rejection(None, "Unsupported Media Type", "unsupported_media_type", status=415)
    if len(body) > max_body_bytes:
        return Rejection(None, "Content Too Large", "body_too_large", status=413)
    return wants_sse


def _message_rungs(body: bytes) -> Rejection | _Message:
    """5-6: one JSON-RPC request or notification object."""
    try:
        decoded, too_deep = decode_nested(body, MAX_NESTING)
    except (UnicodeDecodeError, ValueError, RecursionError):
        # ValueError covers JSONDecodeError and oversized integer literals.
        return Rejection(PARSE_ERROR, "Parse error", "bad_json")
    if too_deep:
        # Deeper than any real request; re-encoding it (digests, the backend hop) would hit
        # Python's recursion limit and answer 500.
        return invalid_request("too_deep", id_of(decoded))
    if isinstance(decoded, list):
        return invalid_request("batch")
    if not isinstance(decoded, dict):
        return invalid_request("not_object")
    message = cast("dict[str, Any]", decoded)
    request_id = message.get("id")
    valid_id = request_id if is_request_id(request_id) else None
    if "result" in message or "error" in message:
        return invalid_request("posted_response", valid_id)
    if message.get("jsonrpc") != "2.0":
        return invalid_request("bad_jsonrpc", valid_id)
    method = message.get("method")
    if not isinstance(method, str):
        return invalid_request("bad_method", valid_id)
    if "id" in message and valid_id is None:
        return invalid_request("bad_id")
    raw_params = message.get("params", {})
    if not isinstance(raw_params, dict):
        return invalid_request("bad_params", valid_id)
    params = cast("dict[str, Any]", raw_params)
    raw_meta = params.get("_meta")
    meta = cast("dict[str, Any]", raw_meta) if isinstance(raw_meta, dict) else None
    return _Message(message, valid_id, method, params, meta)


def _era_rungs(lines: Mapping[str, list[str]], message: _Message) -> Outcome | None:
    """7-8: a handshake-era message, or a notification; None for a modern request."""
    # 7: handshake era, only when nothing in the request says 2026-07-28 (neither the header nor the
    # envelope's version): such an `initialize` goes down the ladder (404 + -32601 at rung 13), never to
    # the backend. A body that carries the modern envelope is not legacy even without the header (-32020).
    version_lines = lines.get(_VERSION_HEADER.lower(), [])
    header_version = version_lines[0] if version_lines else None
    meta = message.meta or {}
    envelope_version = meta.get(PROTOCOL_VERSION_META_KEY)
    says_modern = header_version in MODERN_PROTOCOL_VERSIONS or (
        isinstance(envelope_version, str) and envelope_version in MODERN_PROTOCOL_VERSIONS
    )
    if not says_modern and (
        message.method == "initialize"
        or (header_version is None and PROTOCOL_VERSION_META_KEY not in meta)
        or header_version in HANDSHAKE_PROTOCOL_VERSIONS
    ):
        return LegacyHandshake(message.body)

    # 8: notifications. The spec defines no client notifications over HTTP; acknowledge and drop
    # them, but tell a client at a version we do not serve so, as a request would be told.
    if "id" not in message.body:
        if header_version not in MODERN_PROTOCOL_VERSIONS:
            return unsupported_version(header_version or "", None)
        return NotificationAccepted(message.method)
    return None


def _envelope_rungs(lines: Mapping[str, list[str]], message: _Message) -> Rejection | _Envelope:
    """9-12: routing headers, the per-request envelope, headers against body, a served version."""
    valid_id = message.id
    assert valid_id is not None  # "id" is present (rung 8) and rung 6 proved it valid

    # 9: first-copy and last-copy readers would disagree on a duplicated routing header.
    for header in _ROUTING_HEADERS:
        if len(lines.get(header.lower(), [])) > 1:
            return header_mismatch(
                f"Header mismatch: {header} header appears more than once",
                f"duplicate.{header.lower()}",
                valid_id,
            )

    # 10: the per-request envelope.
    meta = message.meta
    if meta is None:
        return invalid_params(
            f"Invalid params: missing required _meta key {PROTOCOL_VERSION_META_KEY}, {CLIENT_CAPABILITIES_META_KEY}",
            "missing_meta",
            valid_id,
        )
    missing = [key for key in (PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY) if key not in meta]
    if missing:
        return invalid_params(
            f"Invalid params: missing required _meta key {', '.join(missing)}", "missing_meta", valid_id
        )
    capabilities = meta[CLIENT_CAPABILITIES_META_KEY]
    if not isinstance(capabilities, dict):
        return invalid_params(
            f"Invalid params: _meta key {CLIENT_CAPABILITIES_META_KEY} must be an object",
            "bad_capabilities",
            valid_id,
        )
    envelope_version = meta[PROTOCOL_VERSION_META_KEY]

    # 11: headers must say what the body says; runs before the version rung so that a client
    # contradicting itself is told so rather than told its version is unsupported.
    mismatch = _routingheader_mismatch(lines, message.method, message.params, envelope_version, valid_id)
    if mismatch is not None:
        return mismatch

    # 12: a version we serve. The string check cannot fire while rung 11 precedes it (a header is
    # a string, so a non-string envelope already mismatched); it keeps a reordering honest.
    if not isinstance(envelope_version, str):
        return invalid_params(
            f"Invalid params: _meta key {PROTOCOL_VERSION_META_KEY} must be a string",
            "bad_version_type",
            valid_id,
        )
    if envelope_version not in MODERN_PROTOCOL_VERSIONS:
        return unsupported_version(envelope_version, valid_id)
    return _Envelope(valid_id, envelope_version, cast("dict[str, Any]", capabilities))


def _request_rungs(message: _Message, envelope: _Envelope, wants_sse: bool) -> Rejection | Accepted:
    """13-15: a 2026-07-28 method, the optional envelope keys, the params shape."""
    valid_id, method, params = envelope.id, message.method, message.params
    meta = message.meta or {}

    # 13: a 2026-07-28 client request.
    if method not in MODERN_REQUEST_METHODS:
        return Rejection(METHOD_NOT_FOUND, "Method not found", "method_not_found", valid_id)

    # 14: optional envelope keys the gateway acts on.
    log_level = meta.get(LOG_LEVEL_META_KEY)
    if LOG_LEVEL_META_KEY in meta and not (isinstance(log_level, str) and log_level in LOG_LEVELS):
        return invalid_params(
            f"Invalid params: _meta key {LOG_LEVEL_META_KEY} must be a logging level",
            "bad_log_level",
            valid_id,
        )
    progress_token = meta.get("progressToken")
    if "progressToken" in meta and not is_request_id(progress_token):
        return invalid_params(
            "Invalid params: _meta key progressToken must be a string or an integer",
            "bad_progress_token",
            valid_id,
        )

    # 15: the params shape.
    shape_problem = _params_shape(method, params, envelope.version, valid_id)
    if shape_problem is not None:
        return shape_problem

    client_info = meta.get(CLIENT_INFO_META_KEY)
    return Accepted(
        id=valid_id,
        method=method,
        params=params,
        protocol_version=envelope.version,
        client_capabilities=envelope.capabilities,
        client_info=cast("dict[str, Any]", client_info) if isinstance(client_info, dict) else None,
        log_level=cast("str | None", log_level),
        progress_token=cast("str | int | None", progress_token),
        wants_sse=wants_sse,
    )


def _params_shape(method: str, params: Mapping[str, Any], version: str, valid_id: str | int) -> Rejection | None:
    """15: the multi-round-trip fields are checked first so their rejection names them instead of
    drowning in a union's validation errors."""
    if method in INPUT_REQUIRED_METHODS:
        responses = params.get("inputResponses")
        if "inputResponses" in params and not (
            isinstance(responses, dict) and all(isinstance(value, dict) for value in responses.values())
        ):
            return invalid_params(
                "Invalid params: inputResponses must be an object whose values are objects",
                "bad_input_responses",
                valid_id,
            )
        request_state = params.get("requestState")
        if request_state is not None and not isinstance(request_state, str):
            return invalid_params("Invalid params: requestState must be a string", "bad_request_state", valid_id)
    # inputResponses values are checked later against the kind of the request each key answers:
    # unknown keys must be ignored (SEP-2322), which a union-wide schema check cannot do (tasks/*: after -32021).
    shape = {k: v for k, v in params.items() if k != "inputResponses"}
    if method in TASK_METHODS or shape_is_known_valid(method, version, shape):
        return None
    try:
        validate_client_request(method, version, shape)
    except ValidationError as exc:
        return invalid_params("Invalid params", "invalid_params", valid_id, {"reason": summarize(exc)})
    return None


def _routingheader_mismatch(
    lines: Mapping[str, Sequence[str]],
    method: str,
    params: Mapping[str, Any],
    envelope_version: Any,
    request_id: str | int,
) -> Rejection | None:
    """The `-32020` for the first routing header that disagrees with the body, else `None`."""
    checks: list[tuple[str, Any]] = [(_VERSION_HEADER, envelope_version), (_METHOD_HEADER, method)]
    name_key = _NAME_BEARING.get(method) or (NAME_IF_PRESENT.get(method) if _NAME_HEADER.lower() in lines else None)
    if name_key is not None:
        checks.append((_NAME_HEADER, params.get(name_key)))
    for header, body_value in checks:
        values = lines.get(header.lower(), [])
        reason = header.lower()
        if not values:
            return header_mismatch(f"Header mismatch: required {header} header is missing", reason, request_id)
        raw = values[0]
        # Only Mcp-Name may carry the base64 sentinel; every routing header must be a valid field value.
        if not is_field_value(raw):
            header_value = None
        elif header == _NAME_HEADER:
            header_value = decode_header_value(raw)
        else:
            header_value = raw
        if header_value is None:
            return header_mismatch(
                f"Header mismatch: {header} header value is malformed (invalid characters or bad base64)",
                reason,
                request_id,
            )
        if header_value != body_value:
            return header_mismatch(
                f"Header mismatch: {header} header value {quote_for_message(header_value)} "
                f"does not match body value {quote_for_message(body_value)}",
                reason,
                request_id,
            )
    return None
