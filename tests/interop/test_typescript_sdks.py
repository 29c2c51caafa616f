"""Interop with SDKs nobody on this team wrote: the official TypeScript MCP SDKs, in Node subprocesses.

* ``tests/interop/ts/client.mjs``: a 2026-07-28 client on ``@modelcontextprotocol/client`` 2.4.0
  (SDK v2), pinned with ``versionNegotiation: {mode: {pin: "2026-07-28"}}`` (``server/discover``
  must offer the version; no ``initialize`` fallback). It answers InputRequiredResult rounds
  through the SDK's own handlers and prints one JSON line, including every HTTP request it made.
* ``tests/interop/ts/legacy_server.mjs``: a handshake-era server on ``@modelcontextprotocol/sdk``
  1.32.2 (SDK v1): ``McpServer`` over a stateful ``StreamableHTTPServerTransport``, the same tools
  and result strings as ``tests/peers/legacy_fastmcp.py``.

Three pairings, each through the gateway: TS client → Python legacy server, Python ``mcp`` 2.3.0
client → TS legacy server, and TS client → TS legacy server (no Python SDK at either end).
The Node packages are installed by ``scripts/bootstrap.sh`` (``npm ci`` in ``tests/interop/ts``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from harness import BareClient, GatewayHandle, route, running_gateway
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from peers.runner import free_port, run_peer

from gateway import keys
from interop.flows import FLOW_TIMEOUT, MODERN_VERSION, ROOTS, SAMPLED_TEXT, Recorder, WireLog, text_of

pytestmark = pytest.mark.interop

TS_DIR = Path(__file__).resolve().parent / "ts"
TS_CLIENT = TS_DIR / "client.mjs"
TS_SERVER = TS_DIR / "legacy_server.mjs"
TS_CLIENT_TIMEOUT = 30.0
"""Bound on one client.mjs run from the outside (the script bounds itself at 20 s)."""

TOOLS = {"add", "ask_city", "ask_two", "summarize", "show_roots"}
NAME_QUESTION = "What is your name?"
COLOR_QUESTION = "Hello Ann, which color?"
CITY_QUESTION = "Which city?"


# --- Node peers -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def node() -> str:
    """The node binary, after checking the pinned packages are installed (bootstrap does that)."""
    binary = shutil.which("node")
    if binary is None:
        pytest.fail("node is not on PATH; install Node >= 20, then run `bash scripts/bootstrap.sh`", pytrace=False)
    wanted: dict[str, str] = json.loads((TS_DIR / "package.json").read_text())["dependencies"]
    for name, version in wanted.items():
        manifest = TS_DIR / "node_modules" / name / "package.json"
        installed = json.loads(manifest.read_text()).get("version") if manifest.exists() else None
        if installed != version:
            pytest.fail(
                f"{name}@{version} is not installed in {TS_DIR} (found {installed}); run `bash scripts/bootstrap.sh`",
                pytrace=False,
            )
    return binary


@pytest.fixture(scope="session")
def ts_legacy_server(node: str, peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    with run_peer("ts-legacy", [node, str(TS_SERVER), str(port)], port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/mcp"


@dataclass
class TsRun:
    """One client.mjs run: its exit code, stderr, and the JSON line it printed (when it succeeded)."""

    code: int
    stderr: str
    output: dict[str, Any]

    def field(self, name: str) -> Any:
        assert self.code == 0, f"client.mjs exited {self.code}:\n{self.stderr}"
        return self.output[name]


async def run_ts_client(
    node: str, url: str, tool: str, arguments: dict[str, Any] | None = None, *, elicit: str = "accept"
) -> TsRun:
    argv = [str(TS_CLIENT), url, tool, json.dumps(arguments or {}), "--elicit", elicit]
    # Asynchronous on purpose: the gateway under test serves from this test's event loop.
    proc = await asyncio.create_subprocess_exec(
        node,
        *argv,
        cwd=TS_DIR,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TS_CLIENT_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"client.mjs {tool} did not finish within {TS_CLIENT_TIMEOUT}s")
    stderr = err.decode(errors="replace")
    lines = out.decode().splitlines()
    output: dict[str, Any] = {}
    if proc.returncode == 0:
        assert len(lines) == 1, f"client.mjs must print one JSON line, got {lines!r}\n{stderr}"
        output = json.loads(lines[0])
    return TsRun(proc.returncode or 0, stderr, output)


def assert_spoke_2026_07_28(run: TsRun, tool_calls: int) -> None:
    """The TS client negotiated 2026-07-28 and every HTTP request it made was a modern one:
    ``server/discover`` first, never ``initialize``, no GET stream, the version in both the
    ``MCP-Protocol-Version`` header and ``params._meta``; ``tool_calls`` tools/call POSTs (rounds)."""
    assert run.field("protocolVersion") == MODERN_VERSION
    assert run.field("era") == "modern"
    wire = run.field("wire")
    methods = [request["method"] for request in wire]
    assert methods[0] == "server/discover", methods
    assert "initialize" not in methods
    assert methods.count("tools/call") == tool_calls, methods
    for request in wire:
        assert request["http"] == "POST", request
        assert request["version"] == MODERN_VERSION, request
        assert request["metaVersion"] == MODERN_VERSION, request


# --- the gateway ------------------------------------------------------------------------------


@pytest.fixture
async def gateway(legacy_server: str, ts_legacy_server: str) -> AsyncIterator[GatewayHandle]:
    """/py fronts the mcp 1.30.0 FastMCP server, /ts the TypeScript SDK v1 server."""
    async with running_gateway([route("py", "/py", legacy_server), route("ts", "/ts", ts_legacy_server)]) as gw:
        yield gw


def assert_no_holds_left(gateway: GatewayHandle) -> None:
    assert len(gateway.app[keys.HOLDS]) == 0
    for path in ("/py", "/ts"):
        assert gateway.app[keys.ROUTES][path].pool.leased_count == 0


# --- the pin is real ----------------------------------------------------------------------------


async def test_ts_client_pin_refuses_a_legacy_server_without_falling_back(node: str, legacy_server: str) -> None:
    """Straight at a handshake-era server, the pinned TS client fails instead of running initialize."""
    run = await run_ts_client(node, legacy_server, "add", {"a": 2, "b": 3})
    assert run.code != 0
    assert "pinned protocol version 2026-07-28" in run.stderr, run.stderr


# --- TS v2 client → gateway → Python legacy server (mcp 1.30.0) --------------------------------

TS_CLIENT_FLOWS: list[tuple[str, dict[str, Any], str, str, list[str], int, int, int]] = [
    # tool, arguments, elicit action, expected text, elicitations, samplings, roots, tools/call POSTs
    ("add", {"a": 2, "b": 3}, "accept", "5", [], 0, 0, 1),
    ("ask_city", {}, "accept", "city=Paris", [CITY_QUESTION], 0, 0, 2),
    ("ask_city", {}, "decline", "action=decline", [CITY_QUESTION], 0, 0, 2),
    ("ask_city", {}, "cancel", "action=cancel", [CITY_QUESTION], 0, 0, 2),
    ("ask_two", {}, "accept", "name=Ann;color=teal", [NAME_QUESTION, COLOR_QUESTION], 0, 0, 3),
    ("summarize", {"text": "hello world"}, "accept", f"sampled={SAMPLED_TEXT}", [], 1, 0, 2),
    ("show_roots", {}, "accept", "roots=" + ",".join(ROOTS), [], 0, 1, 2),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "action", "expected", "elicitations", "samplings", "roots", "posts"),
    TS_CLIENT_FLOWS,
    ids=[f"{f[0]}-{f[2]}" for f in TS_CLIENT_FLOWS],
)
async def test_ts_client_through_gateway_to_python_legacy_server(
    node: str,
    gateway: GatewayHandle,
    tool: str,
    arguments: dict[str, Any],
    action: str,
    expected: str,
    elicitations: list[str],
    samplings: int,
    roots: int,
    posts: int,
) -> None:
    run = await run_ts_client(node, gateway.url("/py"), tool, arguments, elicit=action)
    assert run.field("text") == expected
    assert run.field("isError") is False
    assert run.field("elicitations") == elicitations
    assert (run.field("samplings"), run.field("roots")) == (samplings, roots)
    assert set(run.field("tools")) >= TOOLS
    assert_spoke_2026_07_28(run, tool_calls=posts)
    assert_no_holds_left(gateway)


# --- Python mcp 2.3.0 client → gateway → TS v1 legacy server -------------------------------------

PY_CLIENT_FLOWS: list[tuple[str, dict[str, Any], str, tuple[int, int, int], int]] = [
    # tool, arguments, expected text, (elicit, sample, roots) callbacks, tools/call POSTs
    ("add", {"a": 2, "b": 3}, "5", (0, 0, 0), 1),
    ("ask_city", {}, "city=Paris", (1, 0, 0), 2),
    ("ask_two", {}, "name=Ann;color=teal", (2, 0, 0), 3),
    ("summarize", {"text": "hello world"}, f"sampled={SAMPLED_TEXT}", (0, 1, 0), 2),
    ("show_roots", {}, "roots=" + ",".join(ROOTS), (0, 0, 1), 2),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "expected", "callbacks", "posts"), PY_CLIENT_FLOWS, ids=[f[0] for f in PY_CLIENT_FLOWS]
)
async def test_python_client_through_gateway_to_ts_legacy_server(
    gateway: GatewayHandle,
    tool: str,
    arguments: dict[str, Any],
    expected: str,
    callbacks: tuple[int, int, int],
    posts: int,
) -> None:
    recorder, wire = Recorder(), WireLog()
    with anyio.fail_after(FLOW_TIMEOUT):
        async with (
            wire.client() as http_client,
            Client(
                streamable_http_client(gateway.url("/ts"), http_client=http_client),
                mode=MODERN_VERSION,
                elicitation_callback=recorder.elicit,
                sampling_callback=recorder.sample,
                list_roots_callback=recorder.roots,
            ) as client,
        ):
            assert client.protocol_version == MODERN_VERSION
            text = text_of(await client.call_tool(tool, arguments))
    assert text == expected
    assert recorder.counts() == callbacks
    if tool == "ask_two":
        assert recorder.elicitations == [NAME_QUESTION, COLOR_QUESTION]
    if tool == "summarize":
        assert recorder.samplings == ["Summarize: hello world"]
    assert wire.count("tools/call") == posts
    assert wire.count("initialize") == 0
    assert_no_holds_left(gateway)


# --- TS v2 client → gateway → TS v1 legacy server (no Python SDK at either end) ----------------


async def test_ts_client_through_gateway_to_ts_legacy_server_two_rounds(node: str, gateway: GatewayHandle) -> None:
    run = await run_ts_client(node, gateway.url("/ts"), "ask_two")
    assert run.field("text") == "name=Ann;color=teal"
    assert run.field("elicitations") == [NAME_QUESTION, COLOR_QUESTION]
    assert (run.field("samplings"), run.field("roots")) == (0, 0)
    assert set(run.field("tools")) == TOOLS
    assert_spoke_2026_07_28(run, tool_calls=3)
    assert_no_holds_left(gateway)


async def test_ts_client_through_gateway_to_ts_legacy_server_sampling(node: str, gateway: GatewayHandle) -> None:
    run = await run_ts_client(node, gateway.url("/ts"), "summarize", {"text": "hello world"})
    assert run.field("text") == f"sampled={SAMPLED_TEXT}"
    assert run.field("isError") is False
    assert (run.field("elicitations"), run.field("samplings"), run.field("roots")) == ([], 1, 0)
    assert_spoke_2026_07_28(run, tool_calls=2)
    assert_no_holds_left(gateway)


# --- a backend session opened for an interactive call ----------------------------------------


async def test_roots_list_on_a_new_backend_session_reaches_the_client(ts_legacy_server: str) -> None:
    """show_roots on a backend session the gateway has just opened (another call holds the idle one).

    The TS v1 server sends ``roots/list`` unrelated, i.e. on the session's standalone GET stream,
    as soon as the tool runs, and drops it if no GET stream is open yet (no event store): the
    gateway must have that stream open before it sends the call. This fails (backend timeout,
    backend_unavailable) while ``StreamableHttpSession.open()`` in gateway/legacy/streamable_http.py starts
    the GET stream as a background task and returns at once, so the ``tools/call`` POST races
    the GET. The 3 s backend timeout only makes such a failure quick."""
    async with (
        running_gateway([route("ts", "/ts", ts_legacy_server, backend={"timeout": 3})]) as gateway,
        aiohttp.ClientSession() as http,
    ):
        held = await BareClient(http, gateway.url("/ts")).call_tool("ask_city")
        assert held.result["resultType"] == "input_required"
        recorder = Recorder()
        with anyio.fail_after(FLOW_TIMEOUT):
            async with Client(gateway.url("/ts"), mode=MODERN_VERSION, list_roots_callback=recorder.roots) as client:
                text = text_of(await client.call_tool("show_roots", {}))
    assert text == "roots=" + ",".join(ROOTS)
    assert recorder.counts() == (0, 0, 1)
