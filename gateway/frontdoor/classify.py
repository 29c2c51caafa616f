"""Classify one HTTP exchange at the 2026-07-28 front door, before anything is sent upstream.

:func:`classify` is pure: it takes the HTTP method, the raw header lines and the body bytes and
returns one frozen outcome. The handler turns that outcome into a response; nothing here knows
about aiohttp, routes or backends.

    Outcome
    ├── Accepted              a valid 2026-07-28 request, envelope unpacked
    ├── NotificationAccepted  an id-less body at a modern version: answer 202, drop it
    ├── LegacyHandshake       a handshake-era message (initialize, or no/old MCP-Protocol-Version)
    └── Rejection             the first rung that failed: HTTP status, JSON-RPC code, fixed message

The ladder follows the SDK's modern entry (`mcp/server/_streamable_http_modern.py` and
`mcp/shared/inbound.py`) but applies the spec exactly (wire reference §2.1-2.5, §2.9, §3.3).
The first failure wins, and its position in the ladder is part of the contract: a client that
contradicts itself hears -32020 before it hears -32022. Each :class:`Rejection` carries a fixed
client-facing `message` and a short `reason` label for logs and metrics. `Mcp-Param-*` headers
need the tool's input schema, so the handler checks them later with
:func:`gateway.frontdoor.headers.check_param_headers`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, cast, get_args

from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    LoggingLevel,
)
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_types.methods import CLIENT_REQUESTS, INPUT_REQUIRED_METHODS, validate_client_request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from gateway.frontdoor.headers import decode_header_value, is_field_value, quote_for_message

__all__ = [
    "Accepted",
    "LegacyHandshake",
    "NotificationAccepted",
    "Outcome",
    "Rejection",
    "classify",
]

MODERN_VERSION: Final = MODERN_PROTOCOL_VERSIONS[-1]
MODERN_REQUEST_METHODS: Final[frozenset[str]] = frozenset(
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
_REASON_LIMIT: Final = 200
MAX_NESTING: Final = 64
"""Deepest nesting of arrays and objects accepted in a request body (-32600 beyond it)."""


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
    http_status: int
    code: int | None
    message: str
    reason: str
    id: str | int | None = None
    data: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


Outcome = Accepted | NotificationAccepted | LegacyHandshake | Rejection


def classify(
    http_method: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
    *,
    max_body_bytes: int,
) -> Outcome:
    """Run the front-door ladder over one HTTP exchange; the first failing rung wins."""
    lines = _fold(headers)

    # 1-4: HTTP layer; these rejections carry no JSON-RPC body.
    if http_method != "POST":
        return Rejection(405, None, "Method Not Allowed", "method_not_allowed", headers={"Allow": "POST"})
    wants_json, wants_sse = _accepts(lines.get("accept", []))
    if not wants_json:
        return Rejection(406, None, "Not Acceptable", "not_acceptable")
    if not _is_json_content_type(lines.get("content-type", [])):
        return Rejection(415, None, "Unsupported Media Type", "unsupported_media_type")
    if len(body) > max_body_bytes:
        return Rejection(413, None, "Content Too Large", "body_too_large")

    # 5-6: one JSON-RPC request or notification object.
    try:
        decoded = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        # ValueError covers JSONDecodeError and oversized integer literals.
        return Rejection(400, PARSE_ERROR, "Parse error", "bad_json")
    if _nesting_exceeds(decoded, MAX_NESTING):
        # Deeper than any real request; re-encoding it (digests, the backend hop) would hit
        # Python's recursion limit and answer 500.
        return _invalid_request("too_deep", _id_of(decoded))
    if isinstance(decoded, list):
        return _invalid_request("batch")
    if not isinstance(decoded, dict):
        return _invalid_request("not_object")
    message = cast("dict[str, Any]", decoded)
    request_id = message.get("id")
    valid_id = request_id if _is_request_id(request_id) else None
    if "result" in message or "error" in message:
        return _invalid_request("posted_response", valid_id)
    if message.get("jsonrpc") != "2.0":
        return _invalid_request("bad_jsonrpc", valid_id)
    method = message.get("method")
    if not isinstance(method, str):
        return _invalid_request("bad_method", valid_id)
    if "id" in message and valid_id is None:
        return _invalid_request("bad_id")
    raw_params = message.get("params", {})
    if not isinstance(raw_params, dict):
        return _invalid_request("bad_params", valid_id)
    params = cast("dict[str, Any]", raw_params)
    raw_meta = params.get("_meta")
    meta = cast("dict[str, Any]", raw_meta) if isinstance(raw_meta, dict) else None

    # 7: handshake era. A body that carries the modern envelope is not legacy even without the
    # header; it falls through to the header rung and hears -32020.
    version_lines = lines.get(_VERSION_HEADER.lower(), [])
    header_version = version_lines[0] if version_lines else None
    envelope_claims_modern = meta is not None and PROTOCOL_VERSION_META_KEY in meta
    if (
        method == "initialize"
        or (header_version is None and not envelope_claims_modern)
        or header_version in HANDSHAKE_PROTOCOL_VERSIONS
    ):
        return LegacyHandshake(message)

    # 8: notifications. The spec defines no client notifications over HTTP; acknowledge and drop
    # them, but tell a client at a version we do not serve so, as a request would be told.
    if "id" not in message:
        if header_version not in MODERN_PROTOCOL_VERSIONS:
            return _unsupported_version(header_version or "", None)
        return NotificationAccepted(method)
    assert valid_id is not None  # "id" is present and step 6 proved it valid

    # 9: first-copy and last-copy readers would disagree on a duplicated routing header.
    for header in _ROUTING_HEADERS:
        if len(lines.get(header.lower(), [])) > 1:
            return _header_mismatch(
                f"Header mismatch: {header} header appears more than once",
                f"duplicate.{header.lower()}",
                valid_id,
            )

    # 10: the per-request envelope.
    if meta is None:
        return _invalid_params(
            f"Invalid params: missing required _meta key {PROTOCOL_VERSION_META_KEY}, {CLIENT_CAPABILITIES_META_KEY}",
            "missing_meta",
            valid_id,
        )
    missing = [key for key in (PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY) if key not in meta]
    if missing:
        return _invalid_params(
            f"Invalid params: missing required _meta key {', '.join(missing)}", "missing_meta", valid_id
        )
    capabilities = meta[CLIENT_CAPABILITIES_META_KEY]
    if not isinstance(capabilities, dict):
        return _invalid_params(
            f"Invalid params: _meta key {CLIENT_CAPABILITIES_META_KEY} must be an object",
            "bad_capabilities",
            valid_id,
        )
    envelope_version = meta[PROTOCOL_VERSION_META_KEY]

    # 11: headers must say what the body says; runs before the version rung so that a client
    # contradicting itself is told so rather than told its version is unsupported.
    mismatch = _routing_header_mismatch(lines, method, params, envelope_version, valid_id)
    if mismatch is not None:
        return mismatch

    # 12: a version we serve. The string check cannot fire while rung 11 precedes it (a header is
    # a string, so a non-string envelope already mismatched); it keeps a reordering honest.
    if not isinstance(envelope_version, str):
        return _invalid_params(
            f"Invalid params: _meta key {PROTOCOL_VERSION_META_KEY} must be a string",
            "bad_version_type",
            valid_id,
        )
    if envelope_version not in MODERN_PROTOCOL_VERSIONS:
        return _unsupported_version(envelope_version, valid_id)

    # 13: a 2026-07-28 client request.
    if method not in MODERN_REQUEST_METHODS:
        return Rejection(404, METHOD_NOT_FOUND, "Method not found", "method_not_found", valid_id)

    # 14: optional envelope keys the gateway acts on.
    log_level = meta.get(LOG_LEVEL_META_KEY)
    if LOG_LEVEL_META_KEY in meta and not (isinstance(log_level, str) and log_level in LOG_LEVELS):
        return _invalid_params(
            f"Invalid params: _meta key {LOG_LEVEL_META_KEY} must be a logging level",
            "bad_log_level",
            valid_id,
        )
    progress_token = meta.get("progressToken")
    if "progressToken" in meta and not _is_request_id(progress_token):
        return _invalid_params(
            "Invalid params: _meta key progressToken must be a string or an integer",
            "bad_progress_token",
            valid_id,
        )

    # 15: the params shape. The multi-round-trip fields are checked first so their rejection
    # names them instead of drowning in a union's validation errors.
    if method in INPUT_REQUIRED_METHODS:
        responses = params.get("inputResponses")
        if "inputResponses" in params and not (
            isinstance(responses, dict) and all(isinstance(value, dict) for value in responses.values())
        ):
            return _invalid_params(
                "Invalid params: inputResponses must be an object whose values are objects",
                "bad_input_responses",
                valid_id,
            )
        request_state = params.get("requestState")
        if request_state is not None and not isinstance(request_state, str):
            return _invalid_params("Invalid params: requestState must be a string", "bad_request_state", valid_id)
    # inputResponses values are checked later against the kind of the request each key answers:
    # unknown keys must be ignored (SEP-2322), which a union-wide schema check cannot do.
    shape = {k: v for k, v in params.items() if k != "inputResponses"}
    try:
        validate_client_request(method, envelope_version, shape)
    except ValidationError as exc:
        return _invalid_params("Invalid params", "invalid_params", valid_id, {"reason": _summarize(exc)})

    client_info = meta.get(CLIENT_INFO_META_KEY)
    return Accepted(
        id=valid_id,
        method=method,
        params=params,
        protocol_version=envelope_version,
        client_capabilities=cast("dict[str, Any]", capabilities),
        client_info=cast("dict[str, Any]", client_info) if isinstance(client_info, dict) else None,
        log_level=cast("str | None", log_level),
        progress_token=cast("str | int | None", progress_token),
        wants_sse=wants_sse,
    )


def _fold(headers: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Group raw header lines by lowercase name, keeping every copy; values lose edge OWS."""
    folded: dict[str, list[str]] = {}
    for name, value in headers:
        folded.setdefault(name.lower(), []).append(value.strip(" \t"))
    return folded


def _accepts(accept_lines: Sequence[str]) -> tuple[bool, bool]:
    """`(allows application/json, allows text/event-stream)` for the Accept header lines.

    The most specific matching media range decides (`type/subtype` over `type/*` over `*/*`),
    and a range with `q=0` refuses (RFC 9110 §12.5.1). A missing Accept allows nothing: the spec
    makes clients list their types.
    """
    ranges: list[tuple[str, str, float]] = []
    for line in accept_lines:
        for item in line.split(","):
            media, *parameters = item.split(";")
            main, _, sub = media.strip().lower().partition("/")
            if not main or not sub:
                continue
            quality = 1.0
            for parameter in parameters:
                key, _, value = parameter.partition("=")
                if key.strip().lower() == "q":
                    try:
                        quality = float(value.strip())
                    except ValueError:
                        quality = 1.0
            ranges.append((main, sub, quality))

    def allows(main: str, sub: str) -> bool:
        best_rank, best_quality = -1, 0.0
        for range_main, range_sub, quality in ranges:
            if (range_main, range_sub) == (main, sub):
                rank = 2
            elif (range_main, range_sub) == (main, "*"):
                rank = 1
            elif (range_main, range_sub) == ("*", "*"):
                rank = 0
            else:
                continue
            if rank > best_rank or (rank == best_rank and quality > best_quality):
                best_rank, best_quality = rank, quality
        return best_rank >= 0 and best_quality > 0

    return allows("application", "json"), allows("text", "event-stream")


def _is_json_content_type(content_type_lines: Sequence[str]) -> bool:
    if len(content_type_lines) != 1:
        return False
    media = content_type_lines[0].split(";", 1)[0]
    return media.strip().lower() == "application/json"


def _nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays/objects deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _id_of(decoded: Any) -> str | int | None:
    request_id = decoded.get("id") if isinstance(decoded, dict) else None
    return request_id if _is_request_id(request_id) else None


def _reject_constant(name: str) -> Any:
    """`json.loads` hook: NaN and Infinity are not JSON."""
    raise ValueError(f"non-JSON constant {name}")


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _routing_header_mismatch(
    lines: Mapping[str, Sequence[str]],
    method: str,
    params: Mapping[str, Any],
    envelope_version: Any,
    request_id: str | int,
) -> Rejection | None:
    """The `-32020` for the first routing header that disagrees with the body, else `None`."""
    checks: list[tuple[str, Any]] = [(_VERSION_HEADER, envelope_version), (_METHOD_HEADER, method)]
    name_key = _NAME_BEARING.get(method)
    if name_key is not None:
        checks.append((_NAME_HEADER, params.get(name_key)))
    for header, body_value in checks:
        values = lines.get(header.lower(), [])
        reason = header.lower()
        if not values:
            return _header_mismatch(f"Header mismatch: required {header} header is missing", reason, request_id)
        raw = values[0]
        # Only Mcp-Name may carry the base64 sentinel; every routing header must be a valid field value.
        if not is_field_value(raw):
            header_value = None
        elif header == _NAME_HEADER:
            header_value = decode_header_value(raw)
        else:
            header_value = raw
        if header_value is None:
            return _header_mismatch(
                f"Header mismatch: {header} header value is malformed (invalid characters or bad base64)",
                reason,
                request_id,
            )
        if header_value != body_value:
            return _header_mismatch(
                f"Header mismatch: {header} header value {quote_for_message(header_value)} "
                f"does not match body value {quote_for_message(body_value)}",
                reason,
                request_id,
            )
    return None


def _invalid_request(reason: str, request_id: str | int | None = None) -> Rejection:
    return Rejection(400, INVALID_REQUEST, "Invalid Request", reason, request_id)


def _invalid_params(message: str, reason: str, request_id: str | int, data: Any = None) -> Rejection:
    return Rejection(400, INVALID_PARAMS, message, reason, request_id, data)


def _header_mismatch(message: str, reason: str, request_id: str | int) -> Rejection:
    return Rejection(400, HEADER_MISMATCH, message, f"header_mismatch.{reason}", request_id)


def _unsupported_version(requested: str, request_id: str | int | None) -> Rejection:
    return Rejection(
        400,
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        "unsupported_version",
        request_id,
        {"supported": list(MODERN_PROTOCOL_VERSIONS), "requested": requested},
    )


def _summarize(exc: ValidationError) -> str:
    """One short line for `data.reason`: where the first error is and what it is, never the input."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    if not errors:
        return "invalid params"
    first = errors[0]
    loc = first["loc"][1:] if first["loc"][:1] == ("params",) else first["loc"]
    location = ".".join(str(part) for part in loc) or "params"
    text = f"{location}: {first['msg']}"
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more)"
    return text if len(text) <= _REASON_LIMIT else text[:_REASON_LIMIT] + "..."
