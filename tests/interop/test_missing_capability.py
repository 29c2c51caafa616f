"""A server request the client did not declare a capability for ends the client's call with -32021.

basic/index.mdx §_meta: "A server MUST NOT rely on capabilities the client has not declared. If
processing a request requires a capability the client did not include in
io.modelcontextprotocol/clientCapabilities, the server MUST return a MissingRequiredClientCapabilityError
(-32021) whose data.requiredCapabilities lists the missing capabilities. On HTTP, the response status
MUST be 400 Bad Request." The legacy server (mcp 1.30.0 FastMCP) asks anyway; the gateway answers the
client with -32021, answers the backend's request with an error, cancels the backend call, and hands
the session back usable.

Compared with the reference native server (mcp 2.3.0 MCPServer, same tools) on the same request:
same HTTP status (400), same code, same ``data.requiredCapabilities``. Allowed difference: the
message. The reference names its resolver ("Client did not declare the form elicitation capability
required by resolver '…'"); the gateway's is fixed ("Missing required client capability") - the
spec fixes only the code and the data (schema.ts MissingRequiredClientCapabilityError), and a fixed
message keeps backend details out of the client's view.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from harness import BareClient, GatewayHandle, route, running_gateway
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from peers.runner import PEERS_DIR, free_port, legacy_python, run_peer

from gateway import keys
from interop.flows import FLOW_TIMEOUT, Recorder

pytestmark = pytest.mark.interop

NOTHING: dict[str, Any] = {}
ALL_BUT_ELICITATION: dict[str, Any] = {"sampling": {}, "roots": {}}
FORM_ONLY: dict[str, Any] = {
    "elicitation": {"form": {}},
    "sampling": {},
}  # no roots: the extras peer asks them at start
ALL_BUT_SAMPLING: dict[str, Any] = {"elicitation": {}, "roots": {}}
ALL_BUT_ROOTS: dict[str, Any] = {"elicitation": {}, "sampling": {}}

CASES = [
    # (route, tool, arguments, declared capabilities, requiredCapabilities)
    ("/py", "ask_city", {}, ALL_BUT_ELICITATION, {"elicitation": {"form": {}}}),
    ("/py", "ask_city", {}, {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
    ("/py", "summarize", {"text": "x"}, ALL_BUT_SAMPLING, {"sampling": {}}),
    ("/py", "show_roots", {}, ALL_BUT_ROOTS, {"roots": {}}),
    ("/extras", "ask_url", {}, FORM_ONLY, {"elicitation": {"url": {}}}),
]


@pytest.fixture(scope="module")
def extras_server(peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    argv = [legacy_python(), str(PEERS_DIR / "legacy_fastmcp_extras.py"), "--port", str(port)]
    with run_peer("legacy-extras", argv, port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
async def gateway(legacy_server: str, extras_server: str) -> AsyncIterator[GatewayHandle]:
    async with running_gateway([route("py", "/py", legacy_server), route("extras", "/extras", extras_server)]) as gw:
        yield gw


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def settled(gateway: GatewayHandle, path: str) -> None:
    """Wait (bounded) until the route's sessions are all back in the pool."""
    pool = gateway.app[keys.ROUTES][path].pool
    with anyio.fail_after(FLOW_TIMEOUT):
        while pool.leased_count or not pool.idle_count:
            await anyio.sleep(0.02)


@pytest.mark.parametrize(("path", "tool", "arguments", "declared", "required"), CASES)
async def test_an_undeclared_capability_is_minus_32021_and_the_session_stays_usable(
    gateway: GatewayHandle,
    http: aiohttp.ClientSession,
    path: str,
    tool: str,
    arguments: dict[str, Any],
    declared: dict[str, Any],
    required: dict[str, Any],
) -> None:
    client = BareClient(http, gateway.url(path), capabilities=declared)
    reply = await client.call_tool(tool, arguments)
    assert reply.status == 400
    assert reply.error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert reply.error["data"] == {"requiredCapabilities": required}
    # The backend's request was answered and its call ended: the same session serves the next call.
    await settled(gateway, path)
    pool = gateway.app[keys.ROUTES][path].pool
    before = pool.initializations
    assert (await client.call_tool("add", {"a": 2, "b": 3})).text == "5"
    assert pool.initializations == before
    assert len(gateway.app[keys.HOLDS]) == 0


@pytest.mark.parametrize(("path", "tool", "arguments", "declared", "required"), [c for c in CASES if c[0] == "/py"])
async def test_the_reference_server_answers_the_same_status_code_and_data(
    gateway: GatewayHandle,
    native_server: str,
    http: aiohttp.ClientSession,
    path: str,
    tool: str,
    arguments: dict[str, Any],
    declared: dict[str, Any],
    required: dict[str, Any],
) -> None:
    ours = await BareClient(http, gateway.url(path), capabilities=declared).call_tool(tool, arguments)
    reference = await BareClient(http, native_server, capabilities=declared).call_tool(tool, arguments)
    assert (
        (ours.status, ours.error["code"])
        == (reference.status, reference.error["code"])
        == (400, MISSING_REQUIRED_CLIENT_CAPABILITY)
    )
    assert ours.error["data"] == reference.error["data"] == {"requiredCapabilities": required}


async def test_the_official_client_without_an_elicitation_callback_gets_minus_32021(
    gateway: GatewayHandle,
) -> None:
    """mcp 2.3.0 declares only the capabilities it has callbacks for; pinned to 2026-07-28."""
    recorder = Recorder()
    with anyio.fail_after(FLOW_TIMEOUT):
        async with Client(gateway.url("/py"), mode="2026-07-28", sampling_callback=recorder.sample) as client:
            with pytest.raises(MCPError) as info:
                await client.call_tool("ask_city", {})
            assert info.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
            assert info.value.error.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
            await settled(gateway, "/py")
            result = await client.call_tool("add", {"a": 1, "b": 1})
    assert not result.is_error
    assert recorder.counts() == (0, 0, 0)
