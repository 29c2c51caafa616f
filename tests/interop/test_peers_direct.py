"""The test peers themselves, driven directly (no gateway), so later failures can blame the gateway.

Every flow runs twice with the same assertions: the ``mcp==2.3.0`` client pinned to
``mode="2026-07-28"`` against the native ``MCPServer`` peer (input arrives as
``InputRequiredResult`` rounds), and the same client pinned to ``mode="legacy"`` against the
``mcp==1.30.0`` FastMCP peer (input arrives as inline server-to-client requests). Matching
results and callback counts here are the contract the gateway must keep when it sits in front of
the legacy peer.

A second group speaks raw HTTP to the legacy peer to pin down *where* its server-to-client
requests travel (POST stream vs standalone GET stream), which the gateway depends on.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.interop

from interop.flows import (  # noqa: E402 - shared with the gateway interop tests
    FLOW_TIMEOUT,
    LEGACY_VERSION,
    MODERN_VERSION,
    ROOTS,
    SAMPLED_TEXT,
    Recorder,
)


@dataclass(frozen=True)
class Peer:
    name: str
    url: str
    mode: str
    protocol_version: str


@pytest.fixture(params=["native", "legacy"])
def peer(request: pytest.FixtureRequest) -> Peer:
    if request.param == "native":
        return Peer("native", request.getfixturevalue("native_server"), MODERN_VERSION, MODERN_VERSION)
    return Peer("legacy", request.getfixturevalue("legacy_server"), "legacy", LEGACY_VERSION)


@asynccontextmanager
async def connect(peer: Peer, recorder: Recorder, **options: Any) -> AsyncIterator[Client]:
    async with Client(
        options.pop("transport", peer.url),
        mode=peer.mode,
        elicitation_callback=recorder.elicit,
        sampling_callback=recorder.sample,
        list_roots_callback=recorder.roots,
        **options,
    ) as client:
        assert client.protocol_version == peer.protocol_version
        yield client


def text_of(result: types.CallToolResult) -> str:
    assert not result.is_error, result.content
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


async def call(peer: Peer, recorder: Recorder, tool: str, arguments: dict[str, Any] | None = None) -> str:
    with anyio.fail_after(FLOW_TIMEOUT):
        async with connect(peer, recorder) as client:
            return text_of(await client.call_tool(tool, arguments or {}))


# --- the same client flow against both peers -------------------------------------------------


async def test_add_needs_no_client_input(peer: Peer) -> None:
    recorder = Recorder()
    assert await call(peer, recorder, "add", {"a": 2, "b": 3}) == "5"
    assert recorder.counts() == (0, 0, 0)


@pytest.mark.parametrize(
    ("action", "expected"),
    [("accept", "city=Paris"), ("decline", "action=decline"), ("cancel", "action=cancel")],
)
async def test_ask_city_elicits_once_and_reports_the_outcome(peer: Peer, action: str, expected: str) -> None:
    recorder = Recorder(elicit_action=action)
    assert await call(peer, recorder, "ask_city") == expected
    assert recorder.elicitations == ["Which city?"]
    assert recorder.counts() == (1, 0, 0)


async def test_ask_two_elicits_twice_and_the_second_question_quotes_the_first_answer(peer: Peer) -> None:
    recorder = Recorder()
    assert await call(peer, recorder, "ask_two") == "name=Ann;color=teal"
    assert recorder.elicitations == ["What is your name?", "Hello Ann, which color?"]
    assert recorder.counts() == (2, 0, 0)


async def test_ask_two_stops_after_the_first_question_is_declined(peer: Peer) -> None:
    recorder = Recorder(elicit_action="decline")
    assert await call(peer, recorder, "ask_two") == "action=decline"
    assert recorder.counts() == (1, 0, 0)


async def test_summarize_samples_once(peer: Peer) -> None:
    recorder = Recorder()
    assert await call(peer, recorder, "summarize", {"text": "hello world"}) == f"sampled={SAMPLED_TEXT}"
    assert recorder.samplings == ["Summarize: hello world"]
    assert recorder.counts() == (0, 1, 0)


async def test_show_roots_lists_roots_once(peer: Peer) -> None:
    recorder = Recorder()
    assert await call(peer, recorder, "show_roots") == "roots=" + ",".join(ROOTS)
    assert recorder.counts() == (0, 0, 1)


async def test_ask_and_sample_has_both_requests_outstanding_at_once(peer: Peer) -> None:
    recorder = Recorder(rendezvous=True)
    assert await call(peer, recorder, "ask_and_sample") == f"city=Paris;sampled={SAMPLED_TEXT}"
    assert recorder.elicitations == ["Which city?"]
    assert recorder.samplings == ["Say something about cities."]
    assert recorder.counts() == (1, 1, 0)


async def test_count_reports_progress_and_logs_each_step(peer: Peer) -> None:
    recorder = Recorder()
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    with anyio.fail_after(FLOW_TIMEOUT):
        # log_level opts a 2026-07-28 request in to log notifications; legacy servers send them anyway.
        async with connect(peer, recorder, logging_callback=on_log, log_level="info") as client:
            result = await client.call_tool("count", {"n": 3}, progress_callback=on_progress)  # type: ignore[arg-type]
    assert text_of(result) == "counted=3"
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert logs == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]


async def test_whoami_returns_the_authorization_header_the_server_saw(peer: Peer) -> None:
    with anyio.fail_after(FLOW_TIMEOUT):
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer peer-test-token"}) as http:
            transport = streamable_http_client(peer.url, http_client=http)
            async with connect(peer, Recorder(), transport=transport) as client:
                assert text_of(await client.call_tool("whoami", {})) == "Bearer peer-test-token"


async def test_whoami_says_none_without_an_authorization_header(peer: Peer) -> None:
    assert await call(peer, Recorder(), "whoami") == "none"


async def test_prompt_resources_and_completions_match(peer: Peer) -> None:
    with anyio.fail_after(FLOW_TIMEOUT):
        async with connect(peer, Recorder()) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            prompt = await client.get_prompt("greet", {"name": "Ann"})
            readme = await client.read_resource("demo://readme")
            item = await client.read_resource("demo://item/7")
            templates = await client.list_resource_templates()
            completion = await client.complete(
                types.PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "al"}
            )
    assert tools >= {"add", "echo", "ask_city", "ask_two", "summarize", "show_roots", "ask_and_sample"}
    assert tools >= {"slow", "count", "whoami"}
    (message,) = prompt.messages
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Hello, Ann!"
    assert [c.text for c in readme.contents if isinstance(c, types.TextResourceContents)] == ["mrtr demo peer readme"]
    assert [c.text for c in item.contents if isinstance(c, types.TextResourceContents)] == ["item 7"]
    assert [t.uri_template for t in templates.resource_templates] == ["demo://item/{id}"]
    assert completion.completion.values == ["alice", "albert"]


# --- the native peer's round structure: the reference shape for the gateway -------------------


async def test_native_peer_answers_a_strict_server_discover(native_server: str) -> None:
    with anyio.fail_after(FLOW_TIMEOUT):
        async with Client(native_server, mode=MODERN_VERSION) as client:
            raw = await client.session.send_discover(MODERN_VERSION)
    discovered = types.DiscoverResult.model_validate(raw)
    assert MODERN_VERSION in discovered.supported_versions
    assert discovered.capabilities.tools is not None


def _answer(recorder: Recorder) -> Callable[[types.InputRequest], Any]:
    async def answer(request: types.InputRequest) -> types.InputResponse:
        ctx: Any = None
        if isinstance(request, types.ElicitRequest):
            return await recorder.elicit(ctx, request.params)
        if isinstance(request, types.CreateMessageRequest):
            return await recorder.sample(ctx, request.params)
        return await recorder.roots(ctx)

    return answer


@pytest.mark.parametrize(
    ("tool", "arguments", "expected_rounds"),
    [
        ("add", {"a": 1, "b": 1}, []),
        ("ask_city", {}, [["elicitation/create"]]),
        ("ask_two", {}, [["elicitation/create"], ["elicitation/create"]]),
        ("summarize", {"text": "x"}, [["sampling/createMessage"]]),
        ("show_roots", {}, [["roots/list"]]),
        ("ask_and_sample", {}, [["elicitation/create", "sampling/createMessage"]]),
    ],
)
async def test_native_peer_input_rounds(
    native_server: str, tool: str, arguments: dict[str, Any], expected_rounds: list[list[str]]
) -> None:
    recorder = Recorder()
    answer = _answer(recorder)
    rounds: list[list[str]] = []
    with anyio.fail_after(FLOW_TIMEOUT):
        async with connect(Peer("native", native_server, MODERN_VERSION, MODERN_VERSION), recorder) as client:
            result = await client.session.call_tool(tool, arguments, allow_input_required=True)
            while isinstance(result, types.InputRequiredResult):
                assert result.input_requests, "the native peer never sends state-only rounds"
                assert isinstance(result.request_state, str)
                rounds.append(sorted(request.method for request in result.input_requests.values()))
                responses = {key: await answer(request) for key, request in result.input_requests.items()}
                result = await client.session.call_tool(
                    tool,
                    arguments,
                    input_responses=responses,
                    request_state=result.request_state,
                    allow_input_required=True,
                )
    assert isinstance(result, types.CallToolResult)
    assert not result.is_error, result.content
    assert rounds == expected_rounds


# --- the legacy peer on the wire: which stream carries which server-to-client request ----------


class LegacyWire:
    """A minimal raw streamable-HTTP client: every SSE message is tagged with the stream it came on."""

    def __init__(self, http: aiohttp.ClientSession, url: str, tg: anyio.abc.TaskGroup) -> None:
        self.http = http
        self.url = url
        self.tg = tg
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        self.send, self.receive = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](100)
        self.init_response_headers: dict[str, str] = {}
        self.responses: list[aiohttp.ClientResponse] = []

    async def _pump(self, source: str, response: aiohttp.ClientResponse) -> None:
        data: list[str] = []
        async for raw in response.content:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                await self.send.send((source, json.loads("\n".join(data))))
                data = []

    async def _post(self, message: dict[str, Any]) -> aiohttp.ClientResponse:
        response = await self.http.post(self.url, json=message, headers=self.headers)
        self.responses.append(response)
        return response

    def close(self) -> None:
        for response in self.responses:
            response.close()

    async def initialize(self) -> None:
        response = await self._post(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY_VERSION,
                    "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
                    "clientInfo": {"name": "peer-wire-test", "version": "0"},
                },
            }
        )
        assert response.status == 200
        self.init_response_headers = dict(response.headers)
        await response.read()
        if session_id := response.headers.get("mcp-session-id"):
            self.headers["mcp-session-id"] = session_id
        self.headers["mcp-protocol-version"] = LEGACY_VERSION
        initialized = await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status == 202

    async def open_get_stream(self) -> None:
        response = await self.http.get(self.url, headers={**self.headers, "Accept": "text/event-stream"})
        self.responses.append(response)
        assert response.status == 200
        assert response.content_type == "text/event-stream"
        self.tg.start_soon(self._pump, "GET", response)

    async def call_tool(self, request_id: str, name: str, arguments: dict[str, Any]) -> str:
        """Send tools/call; return the response content type. Its messages arrive via ``next()``."""
        response = await self._post(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )
        assert response.status == 200
        if response.content_type == "text/event-stream":
            self.tg.start_soon(self._pump, "POST", response)
        else:
            await self.send.send(("POST", await response.json()))
        return response.content_type

    async def next(self) -> tuple[str, dict[str, Any]]:
        return await self.receive.receive()

    async def answer(self, request_id: Any, result: dict[str, Any]) -> None:
        response = await self._post({"jsonrpc": "2.0", "id": request_id, "result": result})
        assert response.status == 202


@asynccontextmanager
async def legacy_wire(url: str) -> AsyncIterator[LegacyWire]:
    with anyio.fail_after(FLOW_TIMEOUT):
        async with aiohttp.ClientSession() as http, anyio.create_task_group() as tg:
            wire = LegacyWire(http, url, tg)
            try:
                async with wire.send, wire.receive:
                    await wire.initialize()
                    yield wire
                    tg.cancel_scope.cancel()
            finally:
                wire.close()


async def test_legacy_peer_answers_in_sse_by_default_and_names_its_session(legacy_server: str) -> None:
    async with legacy_wire(legacy_server) as wire:
        assert wire.init_response_headers["Content-Type"] == "text/event-stream"
        assert wire.headers["mcp-session-id"]
        assert await wire.call_tool("c1", "add", {"a": 1, "b": 2}) == "text/event-stream"
        source, message = await wire.next()
    assert source == "POST"
    assert message["id"] == "c1"
    assert message["result"]["content"] == [{"type": "text", "text": "3"}]


async def test_legacy_peer_sends_elicitation_and_sampling_on_the_post_stream(legacy_server: str) -> None:
    async with legacy_wire(legacy_server) as wire:
        await wire.open_get_stream()
        await wire.call_tool("c1", "ask_and_sample", {})
        # Both requests arrive before either is answered: they are outstanding concurrently.
        first_source, first = await wire.next()
        second_source, second = await wire.next()
        assert (first_source, second_source) == ("POST", "POST")
        requests = {first["method"]: first, second["method"]: second}
        assert set(requests) == {"elicitation/create", "sampling/createMessage"}
        await wire.answer(requests["elicitation/create"]["id"], {"action": "accept", "content": {"city": "Oslo"}})
        await wire.answer(
            requests["sampling/createMessage"]["id"],
            {"role": "assistant", "content": {"type": "text", "text": "fjords"}, "model": "m"},
        )
        source, final = await wire.next()
    assert source == "POST"
    assert final["id"] == "c1"
    assert final["result"]["content"] == [{"type": "text", "text": "city=Oslo;sampled=fjords"}]


async def test_legacy_peer_sends_roots_list_on_the_get_stream(legacy_server: str) -> None:
    async with legacy_wire(legacy_server) as wire:
        await wire.open_get_stream()
        await wire.call_tool("c1", "show_roots", {})
        source, request = await wire.next()
        assert source == "GET"
        assert request["method"] == "roots/list"
        assert "params" not in request
        await wire.answer(request["id"], {"roots": [{"uri": "file:///srv/x"}]})
        source, final = await wire.next()
    assert source == "POST"
    assert final["result"]["content"] == [{"type": "text", "text": "roots=file:///srv/x"}]


async def test_legacy_json_response_variant_answers_plain_json(start_legacy_server: Callable[..., str]) -> None:
    url = start_legacy_server(json_response=True)
    async with legacy_wire(url) as wire:
        assert wire.init_response_headers["Content-Type"] == "application/json"
        assert await wire.call_tool("c1", "add", {"a": 4, "b": 4}) == "application/json"
        source, message = await wire.next()
    assert source == "POST"
    assert message["result"]["content"] == [{"type": "text", "text": "8"}]


async def test_legacy_stateless_variant_assigns_no_session(start_legacy_server: Callable[..., str]) -> None:
    url = start_legacy_server(stateless=True)
    async with legacy_wire(url) as wire:
        assert "mcp-session-id" not in wire.headers
        await wire.call_tool("c1", "echo", {"text": "hi"})
        _, message = await wire.next()
    assert message["result"]["content"] == [{"type": "text", "text": "hi"}]


async def test_legacy_sse_transport_serves_a_handshake_client(legacy_sse_server: str) -> None:
    recorder = Recorder()
    peer = Peer("legacy-sse", legacy_sse_server, "legacy", LEGACY_VERSION)
    with anyio.fail_after(FLOW_TIMEOUT):
        async with connect(peer, recorder, transport=sse_client(legacy_sse_server)) as client:
            assert text_of(await client.call_tool("add", {"a": 20, "b": 22})) == "42"
            assert text_of(await client.call_tool("ask_city", {})) == "city=Paris"
            assert text_of(await client.call_tool("show_roots", {})) == "roots=" + ",".join(ROOTS)
    assert recorder.counts() == (1, 0, 1)
