"""Issue 4 behaviour against the fake legacy server: progress and log streaming, cancellation."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from fake_backend import FakeBackend
from harness import MODERN, BareClient, route, running_gateway
from waiting import eventually

from gateway import keys

Backend = tuple[FakeBackend, str]


def _events(raw: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:].strip()) for line in raw.splitlines() if line.startswith("data:")]


async def _post_sse(
    http: aiohttp.ClientSession,
    url: str,
    name: str,
    arguments: dict[str, Any],
    meta: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> tuple[int, str, str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                **meta,
            },
            **(extra or {}),
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    async with http.post(url, data=json.dumps(body), headers=headers) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.text()


async def test_progress_is_streamed_in_order_then_the_final_response(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        status, ctype, raw = await _post_sse(http, gw.url(), "count", {"n": 25}, {"progressToken": "tok-9"})
    assert (status, ctype.split(";")[0]) == (200, "text/event-stream")
    events = _events(raw)
    progress = [e["params"] for e in events if e.get("method") == "notifications/progress"]
    assert len(progress) == 25
    assert [p["progress"] for p in progress] == sorted(p["progress"] for p in progress)
    assert {p["progressToken"] for p in progress} == {"tok-9"}
    assert not any(e.get("method") == "notifications/message" for e in events)
    assert events[-1]["id"] == 1
    assert events[-1]["result"]["content"][0]["text"] == "counted=25"


async def test_log_messages_only_when_the_request_sets_a_level(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        _, ctype, plain = await _post_sse(http, gw.url(), "count", {"n": 3}, {})
        assert ctype.startswith("application/json")
        assert json.loads(plain)["result"]["resultType"] == "complete"
        _, _, info = await _post_sse(http, gw.url(), "count", {"n": 3}, {"io.modelcontextprotocol/logLevel": "info"})
        _, ctype_err, error_only = await _post_sse(
            http, gw.url(), "count", {"n": 3}, {"io.modelcontextprotocol/logLevel": "error"}
        )
    logs = [e for e in _events(info) if e.get("method") == "notifications/message"]
    assert len(logs) == 3
    assert all(e["params"]["level"] == "info" for e in logs)
    assert ctype_err.startswith("application/json")
    assert "notifications/message" not in error_only


async def test_json_answer_when_the_client_does_not_accept_sse(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        reply = await BareClient(http, gw.url()).call_tool(
            "count", {"n": 3}, extra={"_meta": {"progressToken": 5}}, headers={"Accept": "application/json"}
        )
    assert reply.headers["Content-Type"].startswith("application/json")
    assert reply.text == "counted=3"


async def test_client_disconnect_cancels_the_backend_call(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        await client.call_tool("add", {"a": 1, "b": 1})
        short = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.3))
        try:
            await BareClient(short, gw.url()).call_tool("slow", {"seconds": 30})
        except TimeoutError:
            pass
        finally:
            await short.close()
        await eventually(lambda: backend.cancelled, what="the backend told of the cancellation")
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        await eventually(lambda: not pool.leased_count, what="the session released")
    assert len(backend.cancelled) == 1


async def test_progress_of_a_held_call_resumes_on_the_retry_stream(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        _, ctype, raw = await _post_sse(http, gw.url(), "progress_then_ask", {}, {"progressToken": "first"})
        first = _events(raw)
        assert ctype.startswith("text/event-stream")
        assert [e["params"]["progressToken"] for e in first if e.get("method")] == ["first"]
        result = first[-1]["result"]
        assert result["resultType"] == "input_required"  # the final event, after the progress
        (key,) = result["inputRequests"]
        extra = {
            "inputResponses": {key: {"action": "accept", "content": {"city": "Lima"}}},
            "requestState": result["requestState"],
        }
        _, _, raw2 = await _post_sse(http, gw.url(), "progress_then_ask", {}, {"progressToken": "second"}, extra)
    second = _events(raw2)
    progress = [e["params"] for e in second if e.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"]) for p in progress] == [("second", 2)]
    assert second[-1]["result"]["content"][0]["text"] == "city=Lima"
