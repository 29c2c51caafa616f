"""What a backend request is built from, now remembered instead of rebuilt per call: the pool key's
capabilities half, a session's headers, its timeouts; and the mapping of foreign failures."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from gateway.errors import BackendUnavailable
from gateway.legacy import pool_keys
from gateway.legacy.session import SessionExpired
from gateway.legacy.streamable_http import StreamableHttpSession
from gateway.legacy.wire import MAX_NESTING, backend_errors, decode_json
from gateway.translate import capabilities as caps

SHAPES: list[dict[str, Any]] = [
    {},
    {"elicitation": {"form": {}}},
    {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}},
    {"roots": {}, "elicitation": {"form": {}, "url": {}}, "sampling": {}},  # another insertion order
    {"sampling": {"context": {}, "tools": {}}},
]


def test_the_remembered_pool_key_is_the_canonical_one() -> None:
    for shape in SHAPES * 2:
        assert pool_keys.caps_key(shape) == caps.cache_key(shape)
    assert pool_keys.caps_key(SHAPES[2]) == pool_keys.caps_key(SHAPES[3])


def test_the_remembered_pool_keys_are_bounded() -> None:
    for n in range(pool_keys.MAX_SHAPES * 3):
        shape: dict[str, Any] = {"sampling": {f"k{n}": {}}}
        assert pool_keys.caps_key(shape) == caps.cache_key(shape)
        assert len(pool_keys._keys) <= pool_keys.MAX_SHAPES


async def test_headers_follow_the_session_state_and_keep_their_precedence() -> None:
    async with aiohttp.ClientSession() as http:
        session = StreamableHttpSession(
            http,
            "http://127.0.0.1:9/mcp",
            capabilities={},
            headers={"X-Route": "route", "Accept": "route-accept"},
            timeout=7.0,
            connect_timeout=3.0,
        )
        before = session._headers(with_version=False)
        assert "Mcp-Session-Id" not in before
        assert before["Accept"] == "application/json, text/event-stream"  # the protocol's, not the route's
        session._session_id = "s1"
        session._version = "2025-06-18"
        after = session._headers()
        assert after["Mcp-Session-Id"] == "s1"
        assert after["MCP-Protocol-Version"] == "2025-06-18"
        assert after["X-Route"] == "route"
        forwarded = session._headers(extra={"X-Route": "caller", "Authorization": "Bearer t", "Accept": "x"})
        # a forwarded header overrides the route's, never the protocol's
        assert forwarded["X-Route"] == "caller"
        assert forwarded["Authorization"] == "Bearer t"
        assert forwarded["Accept"] == "application/json, text/event-stream"
        assert forwarded["Mcp-Session-Id"] == "s1"
        assert "Authorization" not in session._headers()  # nothing leaks into the shared dict
        session._version = "2025-03-26"
        assert "MCP-Protocol-Version" not in session._headers()
        total, streaming = session._client_timeout(total=True), session._client_timeout(total=False)
        assert (total.total, total.connect) == (7.0, 3.0)
        assert (streaming.total, streaming.connect, streaming.sock_connect) == (None, 3.0, 3.0)


@pytest.mark.parametrize(
    ("raised", "reason"),
    [
        (aiohttp.ServerTimeoutError("slow"), "timeout"),
        (TimeoutError(), "timeout"),
        (aiohttp.ClientPayloadError("cut"), "stream_broken"),
        (aiohttp.ClientOSError(), "transport_error"),
        (ValueError("bad json"), "malformed_response"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"), "malformed_response"),
        (RecursionError(), "malformed_response"),
    ],
)
def test_backend_errors_map_foreign_failures(raised: Exception, reason: str) -> None:
    with pytest.raises(BackendUnavailable) as failure, backend_errors("tools/call"):
        raise raised
    assert failure.value.reason == reason
    assert failure.value.__cause__ is raised


def test_backend_errors_let_their_own_and_others_through() -> None:
    own = BackendUnavailable("bad_status", "x")
    with pytest.raises(BackendUnavailable) as failure, backend_errors("call"):
        raise own
    assert failure.value is own
    with pytest.raises(SessionExpired), backend_errors("call"):
        raise SessionExpired("s1")
    with pytest.raises(KeyError), backend_errors("call"):
        raise KeyError("not a backend failure")
    with backend_errors("call"):
        pass


def nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


@pytest.mark.parametrize(("opener", "closer"), [("[", "]"), ('{"a":', "}")])
def test_backend_json_nests_at_most_max_nesting_deep(opener: str, closer: str) -> None:
    inner = '{"a":0}'  # the innermost array or object: one level
    at_the_bound = opener * (MAX_NESTING - 1) + inner + closer * (MAX_NESTING - 1)
    assert decode_json(at_the_bound) == json.loads(at_the_bound)
    assert decode_json(at_the_bound.encode()) == json.loads(at_the_bound)
    for too_deep in (
        opener * MAX_NESTING + inner + closer * MAX_NESTING,
        nested(10_000),  # deeper than the decoder itself follows
        '{"ok":[1,2,' + opener * MAX_NESTING + inner + closer * MAX_NESTING + "]}",
    ):
        with pytest.raises(BackendUnavailable) as failure:
            decode_json(too_deep)
        assert failure.value.reason == "malformed_response"


def test_backend_json_is_utf8_only() -> None:
    assert decode_json('{"a":"\u00e9"}'.encode()) == {"a": "\u00e9"}
    assert decode_json(b'\xef\xbb\xbf{"a":1}') == {"a": 1}  # a BOM is ignored (RFC 8259 section 8.1)
    for not_utf8 in (b'{"a":"\xff"}', b'{"a":"\xed\xa0\x80"}', '{"a":1}'.encode("utf-16")):
        with pytest.raises(ValueError):
            decode_json(not_utf8)
    with pytest.raises(ValueError):
        decode_json(b"{not json")
