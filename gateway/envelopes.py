"""The one place JSON-RPC messages and their SSE framing are built.

Every answer the gateway writes — a modern result or error, an old client's error, a listen
stream's notification or final result, the error event that ends a broken forwarded stream — is
built here, so the envelope (``"jsonrpc": "2.0"``, an ``id`` that is always present on responses,
compact UTF-8 JSON) cannot differ between paths. Pure: no I/O, no aiohttp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway import fastjson

JsonObj = dict[str, Any]
RequestId = str | int | None

SSE_PING: Final = b": ping\n\n"
"""An SSE comment: keeps idle connections (and the proxies between) from timing out."""


def result(id_: RequestId, value: Mapping[str, Any]) -> JsonObj:
    return {"jsonrpc": "2.0", "id": id_, "result": value}


def error(id_: RequestId, error_object: Mapping[str, Any]) -> JsonObj:
    """A response carrying ``error_object`` (``code``, ``message`` and optional ``data``)."""
    return {"jsonrpc": "2.0", "id": id_, "error": dict(error_object)}


def error_object(code: int, message: str, data: Any = None) -> JsonObj:
    body: JsonObj = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return body


def notification(method: str, params: Mapping[str, Any]) -> JsonObj:
    return {"jsonrpc": "2.0", "method": method, "params": dict(params)}


def encode(message: Mapping[str, Any]) -> bytes:
    """Compact JSON, UTF-8 (non-ASCII kept as is)."""
    return fastjson.dumps(message)


def sse_event(message: Mapping[str, Any] | bytes) -> bytes:
    """One SSE ``message`` event carrying a JSON-RPC message (already encoded, or a mapping)."""
    data = message if isinstance(message, bytes) else encode(message)
    return b"event: message\ndata: " + data + b"\n\n"
