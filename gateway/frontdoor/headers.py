"""The header side of a 2026-07-28 request: value codec and `Mcp-Param-*` validation.

A 2026-07-28 client mirrors parts of the JSON-RPC body into HTTP headers so intermediaries can
route without parsing the body: `Mcp-Name` (tool/prompt name or resource URI) and one
`Mcp-Param-{Name}` per tool argument whose input schema property carries
`"x-mcp-header": "{Name}"`. A server that parses the body must check that the two copies agree,
or a proxy routing on the header and a backend acting on the body could be told different things.

Values that would not survive an HTTP field round-trip travel as `=?base64?<b64 of UTF-8>?=`;
everything here compares *decoded* values. Pure functions, no I/O (wire reference §2.2).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any, Final, cast

__all__ = [
    "MCP_PARAM_HEADER_PREFIX",
    "check_param_headers",
    "decode_header_value",
    "encode_header_value",
    "is_field_value",
    "param_header_map",
    "quote_for_message",
]

MCP_PARAM_HEADER_PREFIX: Final = "Mcp-Param-"
X_MCP_HEADER_KEY: Final = "x-mcp-header"
MESSAGE_VALUE_LIMIT: Final = 200
"""Client-facing messages never echo more than this many characters of any value."""

_SENTINEL = re.compile(r"=\?base64\?(?P<payload>.*)\?=", re.DOTALL)
_PLAIN_SAFE = re.compile(r"[\x20-\x7e]*")
# RFC 9110 §5.5 as the spec restates it (§Value Encoding): visible ASCII, space and tab.
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")
# RFC 9110 §5.6.2 token: the characters an HTTP field name may use.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# `number` is deliberately absent: the spec forbids it because float rendering is not portable.
_HEADER_TYPES: Final = frozenset({"string", "integer", "boolean"})
# Header spellings that compare numerically; exponent forms never do (same gate as the SDKs).
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def encode_header_value(value: str) -> str:
    """Return `value` as it must appear in an `Mcp-Name` / `Mcp-Param-*` header.

    Printable ASCII without edge whitespace passes verbatim, unless it already looks like the
    sentinel (a receiver would otherwise decode it); anything else is base64-wrapped.
    """
    if _PLAIN_SAFE.fullmatch(value) and value == value.strip() and not _SENTINEL.fullmatch(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def is_field_value(value: str) -> bool:
    """Whether `value` has only the characters an HTTP field value may carry.

    The HTTP server hands over raw non-ASCII bytes as text, so a client that skipped the base64
    encoding would otherwise compare equal to the body; the spec makes such a value invalid.
    """
    return _FIELD_VALUE.fullmatch(value) is not None


def decode_header_value(value: str) -> str | None:
    """Inverse of :func:`encode_header_value`; `None` when the value is malformed.

    Malformed means characters no header value may carry (raw non-ASCII, control characters), bad
    or non-canonical base64, or a payload that is not UTF-8. `None` never equals a body value, so
    a corrupt header can only ever mismatch.
    """
    if not is_field_value(value):
        return None
    match = _SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    # validate=True still tolerates non-zero padding bits; the encoder only emits canonical form.
    if base64.b64encode(raw).decode("ascii") != payload:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def quote_for_message(value: Any) -> str:
    """Render a header or body value for a client-facing message, clipped to 200 characters."""
    text = value if isinstance(value, str) else _json_or_type(value)
    if len(text) > MESSAGE_VALUE_LIMIT:
        text = text[:MESSAGE_VALUE_LIMIT] + "..."
    return repr(text)


def _json_or_type(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return f"<{type(value).__name__}>"


def _annotations(input_schema: Mapping[str, Any] | None) -> Iterator[tuple[str, tuple[str, ...], str]]:
    """Yield `(token, property path, type)` for every valid `x-mcp-header` annotation.

    Only the pure chain of `properties` keys from the root is walked, so annotations under
    `items`, `anyOf`, `$ref`, … are never seen. An annotation that is not an RFC 9110 token, sits
    on a property whose `type` is not string/integer/boolean, or whose name (case-insensitively)
    is claimed by more than one property, is skipped: a conforming client drops such a tool, so
    no header can be owed for it.
    """
    found: list[tuple[str, tuple[str, ...], str]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), input_schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        schema = cast("Mapping[str, Any]", node)
        token = schema.get(X_MCP_HEADER_KEY)
        prop_type = schema.get("type")
        if (
            path
            and isinstance(token, str)
            and _TOKEN.fullmatch(token)
            and isinstance(prop_type, str)
            and prop_type in _HEADER_TYPES
        ):
            found.append((token, path, prop_type))
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            for name, sub in properties.items():
                if isinstance(name, str):
                    stack.append(((*path, name), sub))
    counts: dict[str, int] = {}
    for token, _, _ in found:
        counts[token.lower()] = counts.get(token.lower(), 0) + 1
    for token, path, prop_type in found:
        if counts[token.lower()] == 1:
            yield token, path, prop_type


ANNOTATION_MEMO_ENTRIES: Final = 64
"""Input schemas whose annotations :func:`annotations_of` remembers (oldest forgotten first)."""
_ANNOTATION_MEMO: dict[int, tuple[Mapping[str, Any], tuple[tuple[str, tuple[str, ...], str], ...]]] = {}


def annotations_of(input_schema: Mapping[str, Any] | None) -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """The valid annotations of ``input_schema`` (:func:`_annotations`), remembered per schema object.

    Every ``tools/call`` of a tool checks its headers against the same cached input schema (the
    gateway's tool-schema cache hands out one object per tool and never changes it), so the walk
    runs once per schema object, not once per call. Entries are keyed by identity and hold the
    schema, so an id is never reused while its entry lives; the memo is bounded.
    """
    if input_schema is None:
        return ()
    key = id(input_schema)
    entry = _ANNOTATION_MEMO.get(key)
    if entry is not None and entry[0] is input_schema:
        return entry[1]
    found = tuple(_annotations(input_schema))
    if len(_ANNOTATION_MEMO) >= ANNOTATION_MEMO_ENTRIES:
        del _ANNOTATION_MEMO[next(iter(_ANNOTATION_MEMO))]
    _ANNOTATION_MEMO[key] = (input_schema, found)
    return found


def param_header_map(input_schema: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
    """Map each declared header name (lowercased, without the `Mcp-Param-` prefix) to its property path."""
    return {token.lower(): path for token, path, _ in _annotations(input_schema)}


def _value_at(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = cast("Mapping[str, Any]", node).get(key)
    return node


def _matches(decoded: str, value: Any) -> bool:
    """Whether a decoded header value carries the body argument `value`.

    Booleans are `true`/`false`; numbers compare numerically (`42` matches `42.0`) against a plain
    decimal spelling; strings compare exactly. Anything else has no header form and never matches.
    """
    if isinstance(value, bool):
        return decoded == ("true" if value else "false")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if _DECIMAL.fullmatch(decoded) is None:
            return False
        body = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
        return Decimal(decoded) == body
    if isinstance(value, str):
        return decoded == value
    return False


def check_param_headers(
    headers: Iterable[tuple[str, str]],
    arguments: Mapping[str, Any] | None,
    input_schema: Mapping[str, Any] | None,
) -> str | None:
    """Check a `tools/call`'s `Mcp-Param-*` headers against its arguments; `None` when they agree.

    Otherwise returns the client-facing message for a `-32020` HeaderMismatch. For every valid
    annotation: an argument present and non-null needs exactly one matching header; an absent or
    null argument needs no header. `Mcp-Param-*` headers nobody declared are left alone, since
    intermediaries must forward them.
    """
    annotations = annotations_of(input_schema)
    if not annotations:
        return None  # nothing is owed (most tools): the headers need not even be read
    values: dict[str, list[str]] = {}
    for name, value in headers:
        values.setdefault(name.lower(), []).append(value.strip(" \t"))
    args: Mapping[str, Any] = arguments if arguments is not None else {}
    for token, path, _ in annotations:
        header = MCP_PARAM_HEADER_PREFIX + token
        lines = values.get(header.lower(), [])
        value = _value_at(args, path)
        argument = quote_for_message(".".join(path))
        if len(lines) > 1:
            return f"Header mismatch: {header} header appears more than once"
        if value is None:
            if lines:
                return f"Header mismatch: {header} header is present but argument {argument} is absent"
            continue
        if not lines:
            return f"Header mismatch: {header} header is missing but argument {argument} is present"
        decoded = decode_header_value(lines[0])
        if decoded is None:
            return f"Header mismatch: {header} header value is malformed (invalid characters or bad base64)"
        if not _matches(decoded, value):
            return (
                f"Header mismatch: {header} header value {quote_for_message(decoded)} "
                f"does not match body value {quote_for_message(value)}"
            )
    return None
