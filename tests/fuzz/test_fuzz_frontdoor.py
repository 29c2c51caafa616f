"""Property-based fuzzing of the front door: raw bodies, headers and methods, well-formed and not.

Requests start from a valid 2026-07-28 request (or from raw bytes) and then have headers replaced,
dropped or added and bodies mutated, so the examples reach every rung of the classifier, the auth
hook, the legacy passthrough and the call driver. Invariants (tests/fuzz/live.py): no 5xx; one
valid JSON-RPC answer, a fixed auth refusal or a defined empty status; and holds back to baseline:
an answer that is not ``input_required`` leaves no new hold, and every hold and lease is gone once
the holds' short TTL has passed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import example, given
from hypothesis import strategies as st
from live import LiveGateway, count_case, fuzz_settings

ISSUER = "https://issuer.fuzz"
AUDIENCE = "https://gateway.fuzz/auth"
SIGNING_KEY = ec.generate_private_key(ec.SECP256R1())
PUBLIC_PEM = (
    SIGNING_KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)
PATHS = ["/mcp", "/auth", "/trusted"]
DEEP = "deeply-nested-placeholder"
_MODERN = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

# Tools that end quickly whatever they are given (no `slow`: its argument is a sleep).
TOOLS = ["add", "echo", "ask_city", "ask_two", "summarize", "show_roots", "ask_and_sample", "whoami", "weather"]
METHODS = [
    "tools/call",
    "tools/list",
    "server/discover",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "ping",
    "initialize",
    "notifications/initialized",
    "notifications/cancelled",
    "logging/setLevel",
]
VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05", "2099-01-01", ""]
HEADER_NAMES = [
    "Accept",
    "Content-Type",
    "MCP-Protocol-Version",
    "Mcp-Method",
    "Mcp-Name",
    "Mcp-Session-Id",
    "Mcp-Param-Region",
    "Mcp-Param-Days",
    "Authorization",
    "Origin",
    "X-Mrtr-Forwarded",
    "X-Forwarded-User",
    "Last-Event-ID",
]
# Header values aiohttp's client can send: no control characters; Latin-1 and beyond included.
header_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\r\n"), max_size=40
)


def valid_token(sub: str) -> str:
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": int(time.time()) + 3600}
    return "Bearer " + jwt.encode(claims, SIGNING_KEY, algorithm="ES256")


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_value = st.recursive(
    json_leaf,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@st.composite
def params_for(draw: st.DrawFn, method: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": draw(st.sampled_from(VERSIONS[:1] * 4 + VERSIONS)),
        "io.modelcontextprotocol/clientCapabilities": draw(
            st.sampled_from([{}, {"elicitation": {}}, {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}])
            | json_value
        ),
    }
    if draw(st.booleans()):
        meta["io.modelcontextprotocol/clientInfo"] = draw(st.just({"name": "fuzz", "version": "1"}) | json_value)
    if draw(st.integers(0, 5)) == 0:
        meta["progressToken"] = draw(json_leaf)
    if draw(st.integers(0, 5)) == 0:
        del meta[draw(st.sampled_from(sorted(meta)))]
    params["_meta"] = meta
    if method in ("tools/call", "prompts/get"):
        params["name"] = draw(st.sampled_from(TOOLS) | st.text(max_size=12))
        params["arguments"] = draw(
            st.sampled_from([{}, {"a": 1, "b": 2}, {"text": "hi"}, {"region": "x", "days": 2}])
            | st.dictionaries(st.text(max_size=6), json_value, max_size=3)
            | json_value
        )
    elif method == "resources/read":
        params["uri"] = draw(st.sampled_from(["demo://readme", "demo://missing"]) | st.text(max_size=20))
    if draw(st.integers(0, 6)) == 0:
        params["inputResponses"] = draw(json_value)
    if draw(st.integers(0, 6)) == 0:
        params["requestState"] = draw(st.text(max_size=60) | json_value)
    if draw(st.integers(0, 8)) == 0:
        params[draw(st.text(max_size=8))] = draw(json_value)
    if draw(st.integers(0, 20)) == 0:
        # Deep nesting: the JSON parser takes it, and every encoder after it must too.
        params["arguments"] = {"deep": DEEP}
    return params


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], bytes]:
    path = draw(st.sampled_from(PATHS))
    verb = draw(st.sampled_from(["POST"] * 8 + ["GET", "DELETE", "PUT", "PATCH"]))
    method = draw(st.sampled_from(METHODS) | st.text(max_size=16))
    params = draw(params_for(method))
    request_id: Any = draw(st.integers(-5, 10**6) | st.text(max_size=8) | st.none() | json_value)
    message: Any = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    shape = draw(st.integers(0, 9))
    if shape == 0:
        del message["id"]
    elif shape == 1:
        message["jsonrpc"] = draw(json_leaf)
    elif shape == 2:
        message = [message]
    body = json.dumps(message).encode()
    depth = draw(st.integers(100, 5000))
    body = body.replace(json.dumps(DEEP).encode(), b'{"a":' * depth + b"1" + b"}" * depth)
    mutation = draw(st.integers(0, 9))
    if mutation == 0:
        body = draw(st.binary(max_size=200))
    elif mutation == 1 and body:
        cut = draw(st.integers(0, len(body)))
        body = body[:cut]
    elif mutation == 2 and body:
        at = draw(st.integers(0, len(body) - 1))
        body = body[:at] + bytes([draw(st.integers(0, 255))]) + body[at + 1 :]
    headers = {
        "Accept": draw(
            st.sampled_from(["application/json, text/event-stream", "application/json", "text/event-stream"])
        ),
        "Content-Type": "application/json",
        "MCP-Protocol-Version": draw(st.sampled_from(VERSIONS[:1] * 4 + VERSIONS)),
        "Mcp-Method": method,
    }
    if isinstance(params.get("name"), str) and params["name"].isascii():
        headers["Mcp-Name"] = params["name"]
    if path == "/auth" and draw(st.integers(0, 3)) > 0:
        headers["Authorization"] = valid_token(draw(st.sampled_from(["alice", "bob"])))
    if path == "/trusted" and draw(st.booleans()):
        headers["X-Forwarded-User"] = draw(st.sampled_from(["alice", "bob"]))
    if draw(st.integers(0, 10)) == 0:
        headers["Mcp-Session-Id"] = draw(st.from_regex(r"\As1\.[A-Za-z0-9_=-]{0,40}\Z"))
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(HEADER_NAMES) | st.from_regex(r"\A[A-Za-z][A-Za-z0-9-]{0,20}\Z"))
        if draw(st.integers(0, 3)) == 0:
            headers.pop(name, None)
        else:
            headers[name] = draw(header_text)
    # aiohttp's client refuses control characters in header values (the server never sees them).
    headers = {k: "".join(c if c.isprintable() else "?" for c in v) for k, v in headers.items()}
    return verb, path, headers, body


@pytest.fixture(scope="module")
def gateway() -> Iterator[LiveGateway]:
    routes = [
        {"name": "open", "path": "/mcp", "holds": {"ttl": 2}},
        {
            "name": "jwt",
            "path": "/auth",
            "holds": {"ttl": 2},
            "auth": {"jwt": {"issuer": ISSUER, "audience": [AUDIENCE], "keys": [PUBLIC_PEM], "algorithms": ["ES256"]}},
        },
        {
            "name": "trusted",
            "path": "/trusted",
            "holds": {"ttl": 2},
            "auth": {"trusted_header": {"header": "X-Forwarded-User", "proxies": ["127.0.0.1/32"]}},
        },
    ]
    with LiveGateway(routes, listen={"max_body_bytes": 16384}) as live:
        yield live
        live.wait_for_baseline()


@fuzz_settings(300)
@given(request=requests())
# Found by this property: a session id whose base64 length is 1 mod 4 was an HTTP 500.
@example(request=("POST", "/mcp", {**_MODERN, "MCP-Protocol-Version": "2026-07-28", "Mcp-Session-Id": "s1.0"}, b""))
def test_front_door_answers_every_request_with_one_valid_answer(
    gateway: LiveGateway, request: tuple[str, str, dict[str, str], bytes]
) -> None:
    count_case("test_front_door_answers_every_request_with_one_valid_answer")
    verb, path, headers, body = request
    before = gateway.holds
    answer = gateway.send(verb, path, headers, body)
    result = (answer.message or {}).get("result")
    if not (isinstance(result, dict) and result.get("resultType") == "input_required"):
        assert gateway.holds <= before
