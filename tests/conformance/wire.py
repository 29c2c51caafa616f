"""Raw 2026-07-28 exchanges for the differential suite: build exactly the bytes to send, send them
with aiohttp (no SDK in between), and read back what came: status, content type, and the JSON-RPC
messages of a JSON body or of an SSE stream.

Nothing here knows which server it talks to; ``differential.py`` sends one exchange to both.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import anyio
import yarl
from multidict import CIMultiDict

MODERN = "2026-07-28"
PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
ALL_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
ACCEPT_BOTH = "application/json, text/event-stream"
EXCHANGE_TIMEOUT = 15.0
"""Bound on one exchange, from sending the request to the last message read."""

_NAME_KEYS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def b64_sentinel(value: str) -> str:
    """``value`` in the header encoding ``=?base64?…?=`` (streamable-http.mdx §Value Encoding)."""
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


@dataclass(frozen=True)
class Exchange:
    """One HTTP request, byte for byte: method, header lines in order (duplicates allowed), body."""

    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    method: str = "POST"
    listen: bool = False
    """Read only the first SSE message (a subscriptions/listen stream never ends by itself)."""
    raw: bool = False
    """Write the request on a bare socket: header values go out as their UTF-8 bytes, unchecked
    (the HTTP client library refuses control characters)."""

    def with_headers(self, *lines: tuple[str, str], drop: Iterable[str] = ()) -> Exchange:
        """A copy with the header names in ``drop`` removed and ``lines`` appended."""
        dropped = {name.lower() for name in drop} | {name.lower() for name, _ in lines}
        kept = tuple((n, v) for n, v in self.headers if n.lower() not in dropped)
        return Exchange(self.body, kept + tuple(lines), self.method, self.listen, self.raw)

    def adding(self, *lines: tuple[str, str]) -> Exchange:
        """A copy with ``lines`` appended, keeping every existing line (for duplicated headers)."""
        return Exchange(self.body, self.headers + tuple(lines), self.method, self.listen, self.raw)

    def with_body(self, body: bytes) -> Exchange:
        return Exchange(body, self.headers, self.method, self.listen, self.raw)

    def with_method(self, method: str) -> Exchange:
        return Exchange(self.body, self.headers, method, self.listen, self.raw)

    def on_socket(self) -> Exchange:
        return Exchange(self.body, self.headers, self.method, self.listen, raw=True)


def envelope(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    id_: Any = 1,
    capabilities: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    drop_meta: Sequence[str] = (),
) -> dict[str, Any]:
    """A well-formed 2026-07-28 JSON-RPC request object; ``meta`` overrides, ``drop_meta`` removes keys."""
    body_params = dict(params or {})
    full_meta: dict[str, Any] = {
        PROTOCOL_VERSION: MODERN,
        CLIENT_CAPABILITIES: dict(ALL_CAPABILITIES if capabilities is None else capabilities),
        CLIENT_INFO: {"name": "conformance-suite", "version": "1.0.0"},
    }
    full_meta.update(meta or {})
    for key in drop_meta:
        full_meta.pop(key, None)
    body_params["_meta"] = full_meta
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": body_params}


def headers_for(message: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The headers a conforming client sends for ``message`` (streamable-http.mdx §Request Metadata)."""
    method = str(message.get("method"))
    lines = [
        ("Content-Type", "application/json"),
        ("Accept", ACCEPT_BOTH),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", method),
    ]
    key = _NAME_KEYS.get(method)
    params = message.get("params")
    if key is not None and isinstance(params, Mapping) and isinstance(params.get(key), str):
        value: str = params[key]
        plain = value.isascii() and value.isprintable() and value == value.strip()
        looks_encoded = value.startswith("=?base64?") and value.endswith("?=")
        lines.append(("Mcp-Name", value if plain and not looks_encoded else b64_sentinel(value)))
    return tuple(lines)


def request(method: str, params: Mapping[str, Any] | None = None, **kw: Any) -> Exchange:
    """A conforming POST of one 2026-07-28 request (knobs as in :func:`envelope`)."""
    message = envelope(method, params, **kw)
    return Exchange(json.dumps(message).encode(), headers_for(message))


def call(name: str, arguments: Mapping[str, Any] | None = None, **extra: Any) -> Exchange:
    """A conforming ``tools/call``; ``extra`` goes into params (``inputResponses``, ``requestState``) or
    to :func:`envelope` (``id_``, ``capabilities``, ``meta``, ``drop_meta``)."""
    knobs = {k: extra.pop(k) for k in ("id_", "capabilities", "meta", "drop_meta") if k in extra}
    return request("tools/call", {"name": name, "arguments": dict(arguments or {}), **extra}, **knobs)


def raw_post(message: Any, headers: Sequence[tuple[str, str]] | None = None) -> Exchange:
    """POST ``message`` (any JSON value) with the headers a client would send for it."""
    sent = headers if headers is not None else headers_for(message if isinstance(message, Mapping) else {})
    return Exchange(json.dumps(message).encode(), tuple(sent))


@dataclass(frozen=True)
class Observed:
    """What came back: HTTP status, bare content type, JSON-RPC messages (JSON body or SSE data events)."""

    status: int
    content_type: str
    messages: tuple[Any, ...]
    raw: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def final(self) -> Any:
        """The last message (the JSON-RPC response of a request), or ``None`` for an empty body."""
        return self.messages[-1] if self.messages else None

    @property
    def result(self) -> dict[str, Any]:
        final = self.final
        assert isinstance(final, dict), self
        assert isinstance(final.get("result"), dict), self
        result: dict[str, Any] = final["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        final = self.final
        assert isinstance(final, dict), self
        assert isinstance(final.get("error"), dict), self
        error: dict[str, Any] = final["error"]
        return error


def _is_response(message: Any) -> bool:
    return isinstance(message, dict) and "id" in message and ("result" in message or "error" in message)


async def _read_sse(response: aiohttp.ClientResponse, *, first_only: bool) -> tuple[list[Any], bytes]:
    """Data events as JSON until a JSON-RPC response (or the first event when ``first_only``)."""
    messages: list[Any] = []
    raw = bytearray()
    data: list[str] = []
    async for line_bytes in response.content:
        raw += line_bytes
        line = line_bytes.decode("utf-8").rstrip("\r\n")
        if line.startswith(":"):
            continue
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line or not data:
            continue
        message = json.loads("\n".join(data))
        data = []
        messages.append(message)
        if first_only or _is_response(message):
            break
    return messages, bytes(raw)


_LARGE_BODY = 64 * 1024


def _payload(exchange: Exchange) -> bytes | io.BytesIO | None:
    if not exchange.body and exchange.method == "GET":
        return None
    # Large bodies go as a file object: the client library warns (an error here) on big raw bytes.
    return io.BytesIO(exchange.body) if len(exchange.body) > _LARGE_BODY else exchange.body


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


async def _send_on_socket(url: str, exchange: Exchange) -> Observed:
    """HTTP/1.1 by hand (``Connection: close``); enough for answers that are one JSON body or none."""
    parsed = yarl.URL(url)
    assert parsed.host is not None
    assert parsed.port is not None
    head = [f"{exchange.method} {parsed.raw_path_qs} HTTP/1.1", f"Host: {parsed.host}:{parsed.port}"]
    head += [f"{name}: {value}" for name, value in exchange.headers]
    head += [f"Content-Length: {len(exchange.body)}", "Connection: close"]
    reader, writer = await asyncio.open_connection(parsed.host, parsed.port)
    try:
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("utf-8") + exchange.body)
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
    status_and_headers, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = status_and_headers.decode("latin-1").split("\r\n")
    headers = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    folded = {k.lower(): v for k, v in headers.items()}
    if folded.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    content_type = folded.get("content-type", "").split(";")[0].strip().lower()
    messages = [json.loads(body)] if body and content_type == "application/json" else []
    return Observed(int(status_line.split()[1]), content_type, tuple(messages), body, headers)


async def send(http: aiohttp.ClientSession, url: str, exchange: Exchange) -> Observed:
    """Send ``exchange`` to ``url`` with no header added by the client library, and read the answer."""
    if exchange.raw:
        with anyio.fail_after(EXCHANGE_TIMEOUT):
            return await _send_on_socket(url, exchange)
    headers: CIMultiDict[str] = CIMultiDict(exchange.headers)
    with anyio.fail_after(EXCHANGE_TIMEOUT):
        async with http.request(
            exchange.method,
            url,
            data=_payload(exchange),
            headers=headers,
            skip_auto_headers=("Accept", "Accept-Encoding", "Content-Type", "User-Agent"),
            allow_redirects=False,
        ) as response:
            content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if content_type == "text/event-stream":
                messages, raw = await _read_sse(response, first_only=exchange.listen)
            else:
                raw = await response.read()
                messages = []
                if raw and content_type == "application/json":
                    messages = [json.loads(raw)]
            return Observed(response.status, content_type, tuple(messages), raw, dict(response.headers))
