"""The gateway in front of a real legacy server (mcp 1.30.0 FastMCP, streamable HTTP), driven by
the official mcp 2.3.0 client pinned to mode "2026-07-28" — and, side by side, the same flows
against a native 2.3.0 MRTR server, which must look the same to the client."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import anyio
import mcp_types as types
import pytest
from harness import BareClient, GatewayHandle, accept, route, running_gateway
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.jsonrpc import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY

from gateway import keys
from interop.flows import FLOW_TIMEOUT, ROOTS, SAMPLED_TEXT, Recorder, WireLog, text_of

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"


@pytest.fixture
async def gateway(legacy_server: str) -> AsyncIterator[GatewayHandle]:
    # A batch window above the 10 ms default keeps "elicit and sample at once = one round" exact
    # on a loaded CI machine; the default's behaviour is measured by the benchmark.
    legacy_route = route("legacy", "/mcp", legacy_server, backend={"max_sessions": 512}, holds={"batch_window": 0.05})
    async with running_gateway(
        [legacy_route, route("other", "/other", legacy_server)],
        limits={"max_holds_per_principal": 1000},
    ) as gw:
        yield gw


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@asynccontextmanager
async def sdk_client(
    url: str, recorder: Recorder, wire: WireLog | None = None, authorization: str | None = None, **options: Any
) -> AsyncIterator[Client]:
    wire = wire or WireLog()
    headers = {"Authorization": authorization} if authorization else None
    async with (
        wire.client(headers) as http_client,
        Client(
            streamable_http_client(url, http_client=http_client),
            mode=MODERN,
            elicitation_callback=recorder.elicit,
            sampling_callback=recorder.sample,
            list_roots_callback=recorder.roots,
            **options,
        ) as client,
    ):
        assert client.protocol_version == MODERN
        yield client


# --- issue 2: the no-input surface ----------------------------------------------------------


async def test_strict_server_discover_through_the_gateway(gateway: GatewayHandle, http: aiohttp.ClientSession) -> None:
    result = (await BareClient(http, gateway.url()).request("server/discover")).result
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == [MODERN]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
    assert "tools" in result["capabilities"]


async def test_every_result_carries_result_type(gateway: GatewayHandle, http: aiohttp.ClientSession) -> None:
    client = BareClient(http, gateway.url())
    calls: list[tuple[str, dict[str, Any]]] = [
        ("server/discover", {}),
        ("tools/list", {}),
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/templates/list", {}),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
        ("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}),
        ("resources/read", {"uri": "demo://readme"}),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "A"}},
        ),
    ]
    for method, params in calls:
        reply = await client.request(method, params)
        assert reply.status == 200, (method, reply.body)
        assert reply.result["resultType"] == "complete", method


async def test_official_client_lists_and_calls_through_the_gateway(gateway: GatewayHandle) -> None:
    recorder = Recorder()
    with anyio.fail_after(FLOW_TIMEOUT):
        async with sdk_client(gateway.url(), recorder) as client:
            discovered = await client.session.discover()
            assert MODERN in discovered.supported_versions
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"add", "ask_city", "ask_two", "summarize", "show_roots"} <= tools
            assert "greet" in {p.name for p in (await client.list_prompts()).prompts}
            assert "demo://readme" in {str(r.uri) for r in (await client.list_resources()).resources}
            assert text_of(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
            read = await client.read_resource("demo://readme")
            assert isinstance(read.contents[0], types.TextResourceContents)
            assert read.contents[0].text == "mrtr demo peer readme"
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            assert "Ada" in str(prompt.messages[0].content)
    assert recorder.counts() == (0, 0, 0)


async def test_client_authorization_reaches_the_legacy_server(gateway: GatewayHandle) -> None:
    with anyio.fail_after(FLOW_TIMEOUT):
        async with sdk_client(gateway.url(), Recorder(), authorization="Bearer tok-1") as client:
            assert text_of(await client.call_tool("whoami", {})) == "Bearer tok-1"


# --- issue 3: input rounds, side by side with the native MRTR server -----------------------

FLOWS: list[tuple[str, dict[str, Any], str, str, tuple[int, int, int], int]] = [
    # tool, arguments, elicitation action, expected text, (elicit, sample, roots) callbacks, tools/call POSTs
    ("ask_city", {}, "accept", "city=Paris", (1, 0, 0), 2),
    ("ask_city", {}, "decline", "action=decline", (1, 0, 0), 2),
    ("ask_city", {}, "cancel", "action=cancel", (1, 0, 0), 2),
    ("ask_two", {}, "accept", "name=Ann;color=teal", (2, 0, 0), 3),
    ("summarize", {"text": "hello world"}, "accept", f"sampled={SAMPLED_TEXT}", (0, 1, 0), 2),
    ("show_roots", {}, "accept", "roots=" + ",".join(ROOTS), (0, 0, 1), 2),
    ("ask_and_sample", {}, "accept", f"city=Paris;sampled={SAMPLED_TEXT}", (1, 1, 0), 2),
]


async def _run_flow(url: str, tool: str, arguments: dict[str, Any], action: str) -> tuple[str, Recorder, WireLog]:
    recorder = Recorder(elicit_action=action, rendezvous=tool == "ask_and_sample")
    wire = WireLog()
    with anyio.fail_after(FLOW_TIMEOUT):
        async with sdk_client(url, recorder, wire) as client:
            text = text_of(await client.call_tool(tool, arguments))
    return text, recorder, wire


@pytest.mark.parametrize(
    ("tool", "arguments", "action", "expected", "callbacks", "posts"),
    FLOWS,
    ids=[f"{f[0]}-{f[2]}" for f in FLOWS],
)
async def test_gateway_rounds_match_the_native_server(
    gateway: GatewayHandle,
    native_server: str,
    tool: str,
    arguments: dict[str, Any],
    action: str,
    expected: str,
    callbacks: tuple[int, int, int],
    posts: int,
) -> None:
    via_gateway = await _run_flow(gateway.url(), tool, arguments, action)
    native = await _run_flow(native_server, tool, arguments, action)
    for text, recorder, wire in (via_gateway, native):
        assert text == expected
        assert recorder.counts() == callbacks
        assert wire.count("tools/call") == posts
    assert via_gateway[1].elicitations == native[1].elicitations
    assert via_gateway[1].samplings == native[1].samplings
    assert len(gateway.app[keys.HOLDS]) == 0


@pytest.mark.parametrize("tool", ["ask_city", "ask_two"])
async def test_declining_the_first_question_ends_the_flow_the_same_way(
    gateway: GatewayHandle, native_server: str, tool: str
) -> None:
    via_gateway = await _run_flow(gateway.url(), tool, {}, "decline")
    native = await _run_flow(native_server, tool, {}, "decline")
    assert via_gateway[0] == native[0] == "action=decline"
    assert via_gateway[1].counts() == native[1].counts() == (1, 0, 0)


class PerClientAnswers(Recorder):
    """Answers carry the client's own id, so a crossed wire shows up in the result."""

    def __init__(self, ident: int) -> None:
        super().__init__()
        self.ident = ident

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.elicitations.append(params.message)
        (wanted,) = params.requested_schema["properties"]
        return types.ElicitResult(action="accept", content={wanted: f"{wanted}{self.ident}"})


async def test_two_hundred_interleaved_two_round_calls_keep_their_own_answers(gateway: GatewayHandle) -> None:
    clients, calls_per_client = 20, 10
    results: dict[int, str] = {}
    recorders: dict[int, PerClientAnswers] = {}

    async def one_call(c: int, n: int) -> None:
        ident = c * 1000 + n
        recorder = recorders[ident] = PerClientAnswers(ident)
        async with sdk_client(gateway.url(), recorder, authorization=f"Bearer client-{c}") as client:
            results[ident] = text_of(await client.call_tool("ask_two", {}))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            for n in range(calls_per_client):
                for c in range(clients):
                    group.start_soon(one_call, c, n)

    assert len(results) == clients * calls_per_client
    for ident, text in results.items():
        assert text == f"name=name{ident};color=color{ident}"
        assert recorders[ident].elicitations[1] == f"Hello name{ident}, which color?"
    assert len(gateway.app[keys.HOLDS]) == 0
    pool = gateway.app[keys.ROUTES]["/mcp"].pool
    assert pool.leased_count == 0


def _tamper(state: str) -> str:
    prefix, blob = state.split(".", 1)
    raw = bytearray(base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4)))
    raw[5] ^= 0x80
    return prefix + "." + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


async def test_bad_states_are_refused_and_the_hold_survives(
    gateway: GatewayHandle, http: aiohttp.ClientSession
) -> None:
    alice = BareClient(http, gateway.url(), authorization="Bearer alice")
    first = (await alice.call_tool("ask_two")).result
    state = first["requestState"]
    (key,) = first["inputRequests"]
    answer = {key: accept(name="Ann")}
    refusals = [
        await alice.retry("ask_two", _tamper(state), answer),
        await alice.retry("ask_two", state, answer, authorization="Bearer mallory"),
        await BareClient(http, gateway.url("/other"), authorization="Bearer alice").retry("ask_two", state, answer),
        await alice.retry("ask_two", state, answer, arguments={"unexpected": True}),
    ]
    for reply in refusals:
        assert (reply.status, reply.error["code"], reply.error["message"]) == (
            400,
            INVALID_PARAMS,
            "Invalid or expired requestState",
        )
    second = (await alice.retry("ask_two", state, answer)).result
    assert second["resultType"] == "input_required"
    resent = await alice.retry("ask_two", state, answer)
    assert resent.result == second, "a resend gets the first answer (issue 26)"
    reused = await alice.retry("ask_two", state, {key: accept(name="Eve")})
    assert reused.error["code"] == INVALID_PARAMS, "the same state with other answers is refused"
    (key2,) = second["inputRequests"]
    done = await alice.retry("ask_two", second["requestState"], {key2: accept(color="red")})
    assert done.text == "name=Ann;color=red"


async def test_expired_hold_cancels_the_elicitation_and_the_session_is_reused(
    legacy_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([route("legacy", "/mcp", legacy_server, holds={"ttl": 0.3})]) as gw:
        client = BareClient(http, gw.url())
        held = (await client.call_tool("ask_city")).result
        assert held["resultType"] == "input_required"
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        with anyio.fail_after(10):
            # The tool only finishes (and the session only returns to the idle pool) once the
            # gateway has answered the pending elicitation with cancel.
            while len(gw.app[keys.HOLDS]) or pool.leased_count or not pool.idle_count:
                await anyio.sleep(0.02)
        before = pool.initializations
        assert (await client.call_tool("add", {"a": 1, "b": 1})).text == "2"
        assert pool.initializations == before
        (key,) = held["inputRequests"]
        late = await client.retry("ask_city", held["requestState"], {key: accept(city="x")})
        assert late.error["code"] == INVALID_PARAMS


async def test_a_kind_the_client_did_not_declare_is_never_sent_to_it(
    gateway: GatewayHandle, http: aiohttp.ClientSession
) -> None:
    """FastMCP 1.30.0 elicits even when the session declared no elicitation; the gateway answers
    it with an error upstream instead of forwarding it, and the client's call ends with -32021
    (basic/index.mdx §_meta; more in test_missing_capability.py)."""
    reply = await BareClient(http, gateway.url()).call_tool("ask_city", capabilities={"sampling": {}})
    assert reply.status == 400
    assert reply.error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert reply.error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert "inputRequests" not in reply.body.get("result", {})
