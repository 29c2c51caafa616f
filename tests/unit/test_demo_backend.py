"""The demo backend, and the tests' fake built on it, driven by hand over raw HTTP the way a legacy MCP
client talks to them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from fake_backend import TOOLS as FAKE_TOOLS
from fake_backend import FakeBackend
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, URL_ELICITATION_REQUIRED

from gateway.demo.backend import DEMO_BACKEND_KEY, DemoBackend, start_demo_backend
from gateway.demo.tools import TOOLS

WAIT = 5.0
ALL_CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": False}}
ACCEPT_BOTH = "application/json, text/event-stream"

Json = dict[str, Any]


class LegacyClient:
    """A legacy client written out by hand: session and version headers, ids, SSE frames."""

    def __init__(self, http: TestClient[Any, Any]) -> None:
        self.http = http
        self.session_id: str | None = None
        self.version: str | None = None
        self._next_id = 1

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.version is not None and self.version >= "2025-06-18":
            headers["MCP-Protocol-Version"] = self.version
        headers.update(extra)
        return headers

    async def post(self, message: Json, **headers: str) -> aiohttp.ClientResponse:
        async with asyncio.timeout(WAIT):
            return await self.http.post("/mcp", data=json.dumps(message), headers=self.headers(**headers))

    async def initialize(self, version: str = "2025-11-25", capabilities: Json | None = None) -> Json:
        params = {
            "protocolVersion": version,
            "capabilities": ALL_CAPABILITIES if capabilities is None else capabilities,
            "clientInfo": {"name": "hand", "version": "0"},
        }
        response = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert response.status == 200
        self.session_id = response.headers["Mcp-Session-Id"]
        answer = await read_answer(response)
        self.version = answer["result"]["protocolVersion"]
        initialized = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status == 202
        assert await initialized.read() == b""
        result: Json = answer["result"]
        return result

    async def request(self, method: str, params: Json | None = None, **headers: str) -> aiohttp.ClientResponse:
        message: Json = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        self._next_id += 1
        if params is not None:
            message["params"] = params
        return await self.post(message, **headers)

    async def answer(self, server_request: Json, result: Json) -> None:
        response = await self.post({"jsonrpc": "2.0", "id": server_request["id"], "result": result})
        assert response.status == 202
        assert await response.read() == b""


async def next_event(response: aiohttp.ClientResponse) -> Json:
    """The next SSE event's JSON payload; comments and keep-alives are skipped."""
    data: list[str] = []
    async with asyncio.timeout(WAIT):
        while True:
            raw = await response.content.readline()
            if not raw:
                raise AssertionError("the SSE stream ended")
            line = raw.decode().rstrip("\r\n")
            if not line:
                if data:
                    message: Json = json.loads("\n".join(data))
                    return message
                continue
            if line.startswith("data:"):
                data.append(line.removeprefix("data:").removeprefix(" "))


async def read_answer(response: aiohttp.ClientResponse) -> Json:
    """The JSON-RPC response of a request, from a JSON body or the end of its SSE stream."""
    if response.content_type == "application/json":
        async with asyncio.timeout(WAIT):
            answer: Json = await response.json()
            return answer
    assert response.content_type == "text/event-stream"
    while "method" in (message := await next_event(response)):
        pass
    return message


async def call_tool(
    legacy: LegacyClient,
    name: str,
    arguments: Json | None = None,
    answer: Callable[[Json], Json] | None = None,
    meta: Json | None = None,
) -> tuple[Json, list[Json]]:
    """Call a tool, answer each server request with ``answer``; return the response and what came before."""
    params: Json = {"name": name, "arguments": arguments or {}}
    if meta is not None:
        params["_meta"] = meta
    response = await legacy.request("tools/call", params)
    assert response.status == 200
    if response.content_type == "application/json":
        return await read_answer(response), []
    seen: list[Json] = []
    while "method" in (message := await next_event(response)):
        seen.append(message)
        if "id" in message:
            assert answer is not None, f"unexpected server request {message}"
            await legacy.answer(message, answer(message))
    return message, seen


def text_of(response: Json) -> str:
    result = response["result"]
    assert result["content"][0]["type"] == "text"
    return str(result["content"][0]["text"])


def elicit_answer(**content: str) -> Callable[[Json], Json]:
    return lambda request: {"action": "accept", "content": content}


@pytest.fixture
def backend() -> DemoBackend:
    return DemoBackend(answer_timeout=WAIT)


@pytest.fixture
async def legacy(aiohttp_client: Any, backend: DemoBackend) -> LegacyClient:
    return LegacyClient(await aiohttp_client(backend.app()))


@pytest.fixture
def fake() -> FakeBackend:
    """The tests' fake (tests/fake_backend.py): the demo plus faults, counters and test-only tools."""
    return FakeBackend(answer_timeout=WAIT)


@pytest.fixture
async def fake_legacy(aiohttp_client: Any, fake: FakeBackend) -> LegacyClient:
    return LegacyClient(await aiohttp_client(fake.app()))


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
async def test_handshake_then_tools_list_and_add(
    legacy: LegacyClient, backend: DemoBackend, json_response: bool
) -> None:
    backend.json_response = json_response
    result = await legacy.initialize()

    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == "mrtr-demo-backend"
    assert result["capabilities"]["tools"] == {"listChanged": True}
    assert list(backend.sessions) == [legacy.session_id]
    assert backend.sessions[legacy.session_id or ""].client_capabilities == ALL_CAPABILITIES

    listed = await legacy.request("tools/list")
    expected_type = "application/json" if json_response else "text/event-stream"
    assert listed.content_type == expected_type
    tools = {tool["name"]: tool for tool in (await read_answer(listed))["result"]["tools"]}
    assert set(tools) == set(TOOLS)
    assert {"add", "echo", "ask_city", "ask_two", "summarize", "show_roots"} <= set(tools)
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]

    added, _ = await call_tool(legacy, "add", {"a": 2, "b": 3})
    assert added["result"] == {"content": [{"type": "text", "text": "5"}], "isError": False}


@pytest.mark.parametrize(
    ("offered", "expected"),
    [("2025-03-26", "2025-03-26"), ("2026-07-28", "2025-06-18"), ("2025-11-25", "2025-06-18")],
)
async def test_initialize_echoes_a_configured_version_else_offers_the_newest(
    legacy: LegacyClient, backend: DemoBackend, offered: str, expected: str
) -> None:
    backend.versions = ("2025-03-26", "2025-06-18")
    assert (await legacy.initialize(offered))["protocolVersion"] == expected


@pytest.mark.parametrize(
    ("version", "form_mode"), [("2025-11-25", True), ("2025-06-18", False)], ids=["2025-11-25", "2025-06-18"]
)
async def test_ask_city_elicits_on_the_post_stream_and_finishes_after_the_answer(
    fake_legacy: LegacyClient, fake: FakeBackend, version: str, form_mode: bool
) -> None:
    legacy, backend = fake_legacy, fake
    await legacy.initialize(version)
    response = await legacy.request("tools/call", {"name": "ask_city", "arguments": {}})

    elicitation = await next_event(response)
    assert elicitation["method"] == "elicitation/create"
    assert elicitation["params"]["requestedSchema"]["required"] == ["city"]
    assert ("mode" in elicitation["params"]) is form_mode
    answer = {"jsonrpc": "2.0", "id": elicitation["id"], "result": {"action": "accept", "content": {"city": "Paris"}}}
    posted = await legacy.post(answer)
    assert posted.status == 202

    final = await next_event(response)
    assert text_of(final) == "city=Paris"
    assert backend.received_responses == [answer]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_ask_city_reports_a_refused_elicitation(legacy: LegacyClient, action: str) -> None:
    await legacy.initialize()
    final, _ = await call_tool(legacy, "ask_city", answer=lambda request: {"action": action})
    assert text_of(final) == f"action={action}"


@pytest.mark.parametrize(
    ("tool", "capabilities", "missing"),
    [
        ("ask_city", {"sampling": {}}, "elicitation"),
        ("ask_city", {"elicitation": {"url": {}}}, "elicitation.form"),
        ("summarize", {"elicitation": {}}, "sampling"),
        ("show_roots", {"sampling": {}}, "roots"),
    ],
)
async def test_server_requests_need_the_declared_client_capability(
    legacy: LegacyClient, tool: str, capabilities: Json, missing: str
) -> None:
    await legacy.initialize(capabilities=capabilities)
    final, seen = await call_tool(legacy, tool, {"text": "x"})
    assert seen == []
    assert final["result"]["isError"] is True
    assert f"the {missing} capability" in text_of(final)


async def test_an_unanswered_server_request_times_out_as_a_tool_error(
    legacy: LegacyClient, backend: DemoBackend
) -> None:
    backend.answer_timeout = 0.05
    await legacy.initialize()
    response = await legacy.request("tools/call", {"name": "ask_city", "arguments": {}})

    assert (await next_event(response))["method"] == "elicitation/create"
    final = await next_event(response)
    assert final["result"]["isError"] is True
    assert "no answer to elicitation/create" in text_of(final)


async def test_ask_city_in_json_mode_is_a_tool_error(legacy: LegacyClient, backend: DemoBackend) -> None:
    backend.json_response = True
    await legacy.initialize()
    final, _ = await call_tool(legacy, "ask_city")
    assert final["result"]["isError"] is True
    assert "JSON mode" in text_of(final)


async def test_ask_two_asks_for_the_color_after_the_name(legacy: LegacyClient) -> None:
    await legacy.initialize()

    def answer(request: Json) -> Json:
        if "name" in request["params"]["requestedSchema"]["properties"]:
            return {"action": "accept", "content": {"name": "Ada"}}
        assert "Ada" in request["params"]["message"]
        return {"action": "accept", "content": {"color": "blue"}}

    final, seen = await call_tool(legacy, "ask_two", answer=answer)
    assert text_of(final) == "name=Ada;color=blue"
    assert [message["id"] for message in seen] == [0, 1]


async def test_summarize_samples_once(legacy: LegacyClient) -> None:
    await legacy.initialize()
    reply = {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m"}
    final, seen = await call_tool(legacy, "summarize", {"text": "long"}, answer=lambda request: reply)
    assert [message["method"] for message in seen] == ["sampling/createMessage"]
    assert text_of(final) == "sampled=short"


async def test_ask_and_sample_sends_both_requests_before_either_answer(legacy: LegacyClient) -> None:
    await legacy.initialize()
    response = await legacy.request("tools/call", {"name": "ask_and_sample", "arguments": {}})

    first, second = await next_event(response), await next_event(response)
    assert {first["method"], second["method"]} == {"elicitation/create", "sampling/createMessage"}
    for request in (second, first):
        if request["method"] == "elicitation/create":
            await legacy.answer(request, {"action": "accept", "content": {"city": "Oslo"}})
        else:
            await legacy.answer(request, {"role": "assistant", "content": [{"type": "text", "text": "cold"}]})

    assert text_of(await next_event(response)) == "city=Oslo;sampled=cold"


async def test_show_roots_asks_on_the_get_stream(legacy: LegacyClient) -> None:
    await legacy.initialize()
    async with asyncio.timeout(WAIT):
        stream = await legacy.http.get("/mcp", headers=legacy.headers(Accept="text/event-stream"))
    assert stream.status == 200
    call = await legacy.request("tools/call", {"name": "show_roots", "arguments": {}})

    roots_request = await next_event(stream)
    assert roots_request["method"] == "roots/list"
    await legacy.answer(roots_request, {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]})

    assert text_of(await next_event(call)) == "roots=file:///a,file:///b"
    second = await legacy.http.get("/mcp", headers=legacy.headers(Accept="text/event-stream"))
    assert second.status == 409
    stream.close()


async def test_count_streams_progress_and_logs_before_the_result(fake_legacy: LegacyClient) -> None:
    legacy = fake_legacy
    await legacy.initialize()
    final, seen = await call_tool(legacy, "count", {"n": 2}, meta={"progressToken": "tok"})

    assert text_of(final) == "counted=2"
    progress = [m["params"] for m in seen if m["method"] == "notifications/progress"]
    assert progress == [
        {"progressToken": "tok", "progress": 1, "total": 2},
        {"progressToken": "tok", "progress": 2, "total": 2},
    ]
    assert [m["params"]["level"] for m in seen if m["method"] == "notifications/message"] == ["info", "info"]


async def test_ping_me_waits_for_the_clients_pong(fake_legacy: LegacyClient) -> None:
    legacy = fake_legacy
    await legacy.initialize()
    final, seen = await call_tool(legacy, "ping_me", answer=lambda request: {})
    assert [message["method"] for message in seen] == ["ping"]
    assert text_of(final) == "pong"


async def test_whoami_answers_the_authorization_of_its_call(fake_legacy: LegacyClient) -> None:
    await fake_legacy.initialize()
    response = await fake_legacy.request("tools/call", {"name": "whoami", "arguments": {}}, Authorization="Bearer t")
    assert text_of(await read_answer(response)) == "Bearer t"


async def test_url_login_requires_a_url_elicitation_once_per_session(fake_legacy: LegacyClient) -> None:
    legacy = fake_legacy
    await legacy.initialize("2025-11-25")

    first, _ = await call_tool(legacy, "url_login")
    assert first["error"]["code"] == URL_ELICITATION_REQUIRED
    (elicitation,) = first["error"]["data"]["elicitations"]
    assert elicitation["mode"] == "url"
    assert elicitation["url"].startswith("https://example.invalid/login?")

    second, _ = await call_tool(legacy, "url_login")
    assert text_of(second) == "logged-in"


async def test_session_expires_with_404_after_the_configured_requests(
    fake_legacy: LegacyClient, fake: FakeBackend
) -> None:
    legacy, backend = fake_legacy, fake
    backend.expire_sessions_after_requests = 1
    await legacy.initialize()
    assert (await legacy.request("ping")).status == 200

    expired = await legacy.request("ping")
    assert expired.status == 404
    assert (await legacy.request("tools/list")).status == 404
    await legacy.initialize()
    assert backend.initialize_count == 2


async def test_missing_session_is_400_and_unknown_session_is_404(legacy: LegacyClient) -> None:
    await legacy.initialize()
    session_id = legacy.session_id

    legacy.session_id = None
    missing = await legacy.request("ping")
    assert missing.status == 400
    assert (await missing.json())["error"]["code"] == INVALID_REQUEST

    legacy.session_id = "0" * 32
    assert (await legacy.request("ping")).status == 404
    legacy.session_id = session_id
    assert (await legacy.request("ping")).status == 200


async def test_protocol_version_header_must_match_the_negotiated_version(legacy: LegacyClient) -> None:
    await legacy.initialize("2025-06-18")

    other_version = {"MCP-Protocol-Version": "2025-11-25"}
    assert (await legacy.request("ping", None, **other_version)).status == 400
    legacy.version = None  # the header is now left out
    assert (await legacy.request("ping")).status == 400


async def test_2025_03_26_sessions_need_no_version_header(legacy: LegacyClient) -> None:
    await legacy.initialize("2025-03-26")
    response = await legacy.request("ping")
    assert (await read_answer(response))["result"] == {}


async def test_resources_read_known_uris_and_answer_unknown_with_32002(legacy: LegacyClient) -> None:
    await legacy.initialize()

    readme = await read_answer(await legacy.request("resources/read", {"uri": "demo://readme"}))
    assert readme["result"]["contents"][0]["mimeType"] == "text/markdown"
    item = await read_answer(await legacy.request("resources/read", {"uri": "demo://item/7"}))
    assert item["result"]["contents"][0]["text"] == "item 7"
    missing = await read_answer(await legacy.request("resources/read", {"uri": "demo://nope"}))
    assert missing["error"]["code"] == -32002
    assert missing["error"]["message"] == "Resource not found"


async def test_unknown_tool_prompt_and_method_are_jsonrpc_errors(legacy: LegacyClient) -> None:
    await legacy.initialize()

    unknown_tool, _ = await call_tool(legacy, "nope")
    assert unknown_tool["error"]["code"] == INVALID_PARAMS
    unknown_prompt = await read_answer(await legacy.request("prompts/get", {"name": "nope"}))
    assert unknown_prompt["error"]["code"] == INVALID_PARAMS
    unknown_method = await read_answer(await legacy.request("nope/nope"))
    assert unknown_method["error"]["code"] == METHOD_NOT_FOUND


async def test_prompt_and_completion(legacy: LegacyClient) -> None:
    await legacy.initialize()

    greet = await read_answer(await legacy.request("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}))
    assert greet["result"]["messages"][0]["content"]["text"] == "Please greet Ada."
    completion = await read_answer(
        await legacy.request(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "a"}},
        )
    )
    assert completion["result"]["completion"]["values"] == ["alpha", "beta", "gamma"]


async def test_tools_list_pages_with_an_opaque_cursor(fake_legacy: LegacyClient, fake: FakeBackend) -> None:
    legacy, backend = fake_legacy, fake
    backend.page_size = 5
    await legacy.initialize()

    names: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {} if cursor is None else {"cursor": cursor}
        page = (await read_answer(await legacy.request("tools/list", params)))["result"]
        names += [tool["name"] for tool in page["tools"]]
        pages += 1
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert pages == -(-len(FAKE_TOOLS) // 5)  # every page full but the last
    assert len(names) == len(set(names)) == len(FAKE_TOOLS)
    bad = await read_answer(await legacy.request("tools/list", {"cursor": "garbage"}))
    assert bad["error"]["code"] == INVALID_PARAMS


async def test_delete_ends_the_session(fake_legacy: LegacyClient, fake: FakeBackend) -> None:
    legacy, backend = fake_legacy, fake
    await legacy.initialize()
    session_id = legacy.session_id

    deleted = await legacy.http.delete("/mcp", headers=legacy.headers())
    assert deleted.status == 200
    assert backend.deleted_sessions == [session_id]
    assert (await legacy.request("ping")).status == 404


async def test_cancelled_notification_ends_the_call_without_a_response(
    fake_legacy: LegacyClient, fake: FakeBackend
) -> None:
    legacy, backend = fake_legacy, fake
    await legacy.initialize()
    call = await legacy.request("tools/call", {"name": "slow", "arguments": {"seconds": 60}})
    request_id = legacy._next_id - 1

    notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    assert (await legacy.post(notice)).status == 202

    async with asyncio.timeout(WAIT):
        assert await call.content.read() == b""
    assert backend.cancelled == [request_id]


async def test_injected_faults(fake_legacy: LegacyClient, fake: FakeBackend) -> None:
    legacy, backend = fake_legacy, fake
    await legacy.initialize()

    backend.fail_status = 503
    assert (await legacy.request("ping")).status == 503
    backend.fail_status = None

    backend.garbage = True
    garbage = await legacy.request("ping")
    assert garbage.status == 200
    with pytest.raises(ValueError):
        json.loads(await garbage.read())
    backend.garbage = False

    backend.require_host = "mcp.example:443"
    assert (await legacy.request("ping")).status == 421
    backend.require_host = f"127.0.0.1:{legacy.http.port}"
    assert (await legacy.request("ping", Origin="http://evil.example")).status == 403
    assert (await legacy.request("ping")).status == 200
    assert backend.last_headers["Host"] == backend.require_host


async def test_hang_never_answers(fake_legacy: LegacyClient, fake: FakeBackend) -> None:
    legacy, backend = fake_legacy, fake
    await legacy.initialize()
    backend.hang = True
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await legacy.http.post("/mcp", data="{}", headers=legacy.headers())


async def test_start_demo_backend_serves_a_real_port() -> None:
    runner, url = await start_demo_backend(answer_timeout=WAIT)
    try:
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/mcp")
        backend = runner.app[DEMO_BACKEND_KEY]
        async with aiohttp.ClientSession() as http:
            headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-03-26",
                    "capabilities": {},
                    "clientInfo": {"name": "x", "version": "0"},
                },
            }
            async with asyncio.timeout(WAIT), http.post(url, json=init, headers=headers) as response:
                headers["Mcp-Session-Id"] = response.headers["Mcp-Session-Id"]
                assert (await read_answer(response))["result"]["protocolVersion"] == "2025-03-26"
            params = {"name": "add", "arguments": {"a": 2, "b": 3}}
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
            async with asyncio.timeout(WAIT), http.post(url, json=call, headers=headers) as response:
                assert text_of(await read_answer(response)) == "5"
        assert list(backend.sessions) == [headers["Mcp-Session-Id"]]
    finally:
        await runner.cleanup()
