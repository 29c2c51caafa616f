"""The front door against hostile or careless clients: Origin, bounded labels and logs, no 5xx,
error codes for unknown names and cursors."""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

import aiohttp
import pytest
import structlog
from fake_backend import FakeBackend
from harness import MODERN, BareClient, route, running_gateway
from mcp_types.jsonrpc import INVALID_PARAMS

from gateway.observability.logging import configure_logging

Backend = tuple[FakeBackend, str]
MODERN_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": MODERN,
}
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def _listen_body() -> str:
    params = {"_meta": META, "notifications": {"toolsListChanged": True}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params})


# --- Origin (transports/streamable-http.mdx §Security & Endpoint) ------------------------------------


@pytest.mark.parametrize(
    ("verb", "headers", "body"),
    [
        (
            "POST",
            {**MODERN_HEADERS, "Mcp-Method": "tools/list"},
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}),
        ),
        ("POST", {**MODERN_HEADERS, "Mcp-Method": "subscriptions/listen"}, _listen_body()),
        (
            "POST",
            {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "x", "version": "0"},
                    },
                }
            ),
        ),
        ("GET", {"Accept": "text/event-stream", "Mcp-Session-Id": "s1.whatever"}, None),
        ("DELETE", {"Mcp-Session-Id": "s1.whatever"}, None),
        ("PUT", {}, "{}"),
    ],
)
async def test_a_foreign_origin_is_refused_on_every_endpoint_by_default(
    fake_backend: Backend, http: aiohttp.ClientSession, verb: str, headers: dict[str, str], body: str | None
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        for origin, refused in (("https://evil.example", True), ("null", True), ("http://localhost:6274", False)):
            async with http.request(verb, gw.url(), headers={**headers, "Origin": origin}, data=body) as resp:
                assert (resp.status == 403) is refused, (origin, resp.status)


async def test_requests_without_origin_and_from_listed_origins_are_served(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway(
        [route("demo", "/mcp", url)], listen={"allowed_origins": ["https://app.example.com"]}
    ) as gw:
        client = BareClient(http, gw.url())
        assert (await client.request("tools/list")).status == 200
        assert (await client.request("tools/list", headers={"Origin": "https://APP.example.com:443"})).status == 200
        assert (await client.request("tools/list", headers={"Origin": "http://127.0.0.1:9"})).status == 200
        # Same origin as the Host header is not enough: that is what a DNS-rebinding page sends.
        host = gw.base.removeprefix("http://")
        same = await client.request(
            "tools/list", headers={"Origin": gw.base, "Host": f"rebound.example:{host.split(':')[1]}"}
        )
        assert same.status == 200  # loopback address in the Origin: allowed
        rebound = await client.request(
            "tools/list", headers={"Origin": "http://rebound.example:8080", "Host": "rebound.example:8080"}
        )
        assert rebound.status == 403


def test_an_allowed_origin_that_is_not_an_origin_is_a_config_error() -> None:
    from gateway.config.load import ConfigError, parse_config

    data = {"state": {"keys": ["k" * 32]}, "routes": [route("demo", "/mcp", "http://127.0.0.1:1/mcp")]}
    with pytest.raises(ConfigError, match="allowed_origins"):
        parse_config({**data, "listen": {"allowed_origins": ["https://app.example.com/path"]}}, env={})


# --- bounded metric labels and log fields (issue 8 item 3) -------------------------------------------


async def test_random_notification_methods_leave_metrics_and_log_lines_small(
    fake_backend: Backend, http: aiohttp.ClientSession, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url = fake_backend
    configure_logging("info", json_logs=True)
    try:
        async with running_gateway([route("demo", "/mcp", url)]) as gw:
            async with http.get(gw.url("/metrics")) as resp:
                baseline = len(await resp.read())
            capsys.readouterr()
            semaphore = asyncio.Semaphore(32)

            async def notify() -> int:
                method = secrets.token_hex(8 * 1024)  # 16 KiB
                body = json.dumps({"jsonrpc": "2.0", "method": method, "params": {}})
                async with (
                    semaphore,
                    http.post(gw.url(), data=body, headers=MODERN_HEADERS) as resp,
                ):
                    return resp.status

            statuses = await asyncio.gather(*(notify() for _ in range(2000)))
            assert set(statuses) == {202}
            async with http.get(gw.url("/metrics")) as resp:
                after = len(await resp.read())
        logged = capsys.readouterr()
    finally:
        structlog.reset_defaults()
    assert after - baseline < 16 * 1024, (baseline, after)
    lines = (logged.out + logged.err).splitlines()
    assert lines, "the front door logs one line per request"
    assert max(len(line) for line in lines) < 2048
    assert sum(len(line) for line in lines) < 2000 * 2048


# --- no 5xx from client input (issue 8 item 7) -------------------------------------------------------


def _nested(depth: int) -> bytes:
    """``{"a": {"a": … 1 …}}`` as JSON text (encoding it with json.dumps would itself overflow)."""
    return b'{"a": ' * depth + b"1" + b"}" * depth


def _tools_call(arguments: Any) -> bytes:
    raw = arguments if isinstance(arguments, bytes) else json.dumps(arguments).encode()
    params = json.dumps({"_meta": META, "name": "add"}).encode()
    return (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
        + params[:-1]
        + b', "arguments": '
        + raw
        + b"}}"
    )


TOOLS_CALL_HEADERS = {**MODERN_HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": "add"}
LEGACY_POST = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()


@pytest.mark.parametrize(
    ("verb", "headers", "body"),
    [
        pytest.param("POST", {**LEGACY_POST, "Mcp-Session-Id": "s1.AAAAA"}, PING, id="session-id-len-1-mod-4"),
        pytest.param("GET", {"Accept": "text/event-stream", "Mcp-Session-Id": "s1.AAAAA"}, None, id="get-bad-session"),
        pytest.param("DELETE", {"Mcp-Session-Id": "s1.A"}, None, id="delete-bad-session"),
        pytest.param("POST", {**LEGACY_POST, "Mcp-Session-Id": "s1.AAAA"}, PING, id="session-id-too-short"),
        pytest.param("POST", {**LEGACY_POST, "Mcp-Session-Id": "s1." + "A" * 4000}, PING, id="session-id-too-long"),
        pytest.param("POST", {**LEGACY_POST, "Mcp-Session-Id": "s1.=="}, PING, id="session-id-padding"),
        pytest.param("POST", TOOLS_CALL_HEADERS, _tools_call(_nested(1000)), id="arguments-1000-deep"),
        # Just under the decoder's limit, re-encoding deeper in the stack overflowed: HTTP 500 before.
        *(
            pytest.param("POST", TOOLS_CALL_HEADERS, _tools_call(_nested(d)), id=f"arguments-{d}-deep")
            for d in (976, 978, 980)
        ),
        pytest.param("POST", TOOLS_CALL_HEADERS, _tools_call(_nested(65)), id="arguments-65-deep"),
        pytest.param("POST", TOOLS_CALL_HEADERS, b"[" * 100_000 + b"]" * 100_000, id="array-100000-deep"),
        pytest.param(
            "POST", TOOLS_CALL_HEADERS, b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}', id="invalid-utf8"
        ),
        pytest.param("POST", TOOLS_CALL_HEADERS, b'{"jsonrpc": "2.0", "id": 1e999}', id="huge-float-id"),
        pytest.param("POST", TOOLS_CALL_HEADERS, b'{"id": 1' + b"1" * 5000 + b"}", id="huge-int"),
        pytest.param(
            "POST",
            {**MODERN_HEADERS, "Mcp-Method": "tools/list"},
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META, "cursor": 5}}
            ).encode(),
            id="cursor-not-a-string",
        ),
        pytest.param(
            "POST",
            {**MODERN_HEADERS, "Mcp-Method": "tools/list"},
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META, "cursor": "c1.AAAAA"}}
            ).encode(),
            id="cursor-bad-base64",
        ),
        pytest.param(
            "POST", {**TOOLS_CALL_HEADERS, "Mcp-Name": "=?base64?!!!?="}, _tools_call({}), id="name-header-bad-base64"
        ),
    ],
)
async def test_malformed_client_input_never_gets_a_5xx(
    fake_backend: Backend, http: aiohttp.ClientSession, verb: str, headers: dict[str, str], body: bytes | None
) -> None:
    _, url = fake_backend
    async with (
        running_gateway([route("demo", "/mcp", url)]) as gw,
        http.request(verb, gw.url(), headers=headers, data=body) as resp,
    ):
        assert 400 <= resp.status < 500, (resp.status, await resp.text())


@pytest.mark.parametrize(
    "raw_header",
    [b"Authorization: Bearer \xff\xfe", b"Mcp-Name: \xc3\xa9t\xc3\xa9", b"Mcp-Session-Id: s1.\xff"],
)
async def test_non_utf8_header_bytes_never_get_a_5xx(fake_backend: Backend, raw_header: bytes) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        host, port = gw.base.removeprefix("http://").split(":")
        body = _tools_call({"a": 1, "b": 2})
        head = (
            b"POST /mcp HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            b"Mcp-Method: tools/call\r\n" + raw_header + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n"
            b"Connection: close\r\n\r\n"
        )
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 5)
        try:
            writer.write(head + body)
            await writer.drain()
            status_line = await asyncio.wait_for(reader.readline(), 10)
        finally:
            writer.close()
        status = int(status_line.split()[1])
        assert status < 500, status_line


# --- codes for unknown names and cursors (issue 7 item 5) --------------------------------------------


@pytest.mark.parametrize("fake_backend", [{"page_size": 2}], indirect=True)
async def test_gateway_cursors_page_through_and_a_foreign_cursor_is_invalid_params(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    """server/utilities/pagination.mdx §Error Handling: invalid cursors SHOULD get -32602."""
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        first = (await client.request("tools/list")).result
        assert first["nextCursor"].startswith("c1.")
        second = (await client.request("tools/list", {"cursor": first["nextCursor"]})).result
        assert {t["name"] for t in second["tools"]}.isdisjoint({t["name"] for t in first["tools"]})
        for cursor in ("2", "garbage", first["nextCursor"] + "A", first["nextCursor"][:-2]):
            refused = await client.request("tools/list", {"cursor": cursor})
            assert (refused.status, refused.error["code"]) == (400, INVALID_PARAMS), cursor
        # A cursor issued for one list is not valid for another.
        other = await client.request("prompts/list", {"cursor": first["nextCursor"]})
        assert other.error["code"] == INVALID_PARAMS
