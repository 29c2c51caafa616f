"""Legacy tasks passed through (issue 19, docs/conformance.md A27-A32) over a second, independent
implementation: the Python SDK ``mcp==1.30.0``'s low-level server with its experimental tasks
(``tests/peers/legacy_tasks_server.py``), streamable HTTP, behind the gateway, driven by the bare
2026-07-28 client of ``tests/harness.py`` and the helpers of ``test_tasks_everything.py``.

Unlike server-everything, 1.30.0 sends ``notifications/tasks/status`` unrelated to any request (the
standalone GET stream), answers -32601 to a ``required`` tool called without ``params.task``, scopes
its task ids to the creating session (another session's ``tasks/*`` is "Task not found"), and answers
a cancelled task's ``tasks/result`` with an empty result.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from harness import BareClient, accept, route, running_gateway, running_replicas
from mcp_types.jsonrpc import INTERNAL_ERROR
from peers.runner import PEERS_DIR, free_port, legacy_python, run_peer
from waiting import eventually

from interop.test_tasks_everything import (
    BACKEND,
    CAPS,
    DECLARING,
    POLL_MS,
    RELATED_TASK,
    TERMINAL,
    TTL_S,
    create,
    get,
    reaches,
    task_request,
    text_of,
)

pytestmark = pytest.mark.interop


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture(scope="module")
def legacy_tasks(peer_log_dir: Path) -> Iterator[str]:
    """The 1.30.0 task server, shared by the module's tests (each uses its own labels and topics)."""
    port = free_port()
    argv = [legacy_python(), str(PEERS_DIR / "legacy_tasks_server.py"), "--port", str(port)]
    with run_peer("legacy-tasks", argv, port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/mcp"


def tasks_route(url: str, **options: Any) -> dict[str, Any]:
    tasks = {"enabled": True, "ttl": TTL_S, "poll_interval_ms": POLL_MS, **options}
    return route("legacy-tasks", "/mcp", url, backend=BACKEND, tasks=tasks)


async def cancels_seen(client: BareClient) -> dict[str, list[str]]:
    """What the server recorded of ``tasks/cancel`` (a tool without task support, called plainly)."""
    reply = await client.call_tool("cancels_seen", {}, capabilities=CAPS)
    assert reply.status == 200, reply.body
    seen: dict[str, list[str]] = json.loads(text_of(reply.result))
    return seen


async def test_without_the_extension_required_task_tools_answer_normal_results(
    legacy_tasks: str, http: aiohttp.ClientSession
) -> None:
    """A32: the task is created upstream and awaited; its question is an MRTR round. An ``optional``
    tool is called without a task, for a declaring client too while the route's mode is ``off`` (A27)."""
    async with running_gateway([tasks_route(legacy_tasks)]) as gw:
        client = BareClient(http, gw.url())
        report = await client.call_tool("slow_report", {"topic": "tides"}, capabilities=CAPS)
        asked = await client.call_tool("ask_name", {}, capabilities=CAPS)
        ((key, question),) = asked.result["inputRequests"].items()
        answered = await client.retry(
            "ask_name", asked.result["requestState"], {key: accept(name="Ada")}, {}, capabilities=CAPS
        )
        summed = await client.call_tool("quick_sum", {"a": 1, "b": 2}, capabilities=CAPS)
        declaring = await client.call_tool("quick_sum", {"a": 1, "b": 3}, capabilities=DECLARING)
    assert report.status == 200, report.body
    assert report.result["resultType"] == "complete", report.result
    assert report.result.get("isError") is not True, report.result
    assert text_of(report.result) == "report: tides"
    assert "taskId" not in report.result
    assert RELATED_TASK not in report.result.get("_meta", {})
    assert asked.result["resultType"] == "input_required", asked.result
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"] == "What is your name?"
    assert answered.result["resultType"] == "complete", answered.result
    assert text_of(answered.result) == "hello Ada"
    assert RELATED_TASK not in answered.result.get("_meta", {})
    assert text_of(summed.result) == "sum 3"  # not a task: the server's own synchronous path
    assert declaring.result["resultType"] == "complete", declaring.result  # the route's mode is off (A27)
    assert text_of(declaring.result) == "sum 4"


async def test_with_the_extension_a_required_tool_is_a_task_that_completes(
    legacy_tasks: str, http: aiohttp.ClientSession
) -> None:
    seen: list[dict[str, Any]] = []
    async with running_gateway([tasks_route(legacy_tasks, tools={"quick_sum": {"mode": "always"}})]) as gw:
        client = BareClient(http, gw.url())
        created = await create(client, "slow_report", {"topic": "currents"})
        task_id = created["taskId"]
        working = await get(client, task_id)
        done = await reaches(client, task_id, *TERMINAL, seen=seen)
        optional = await create(client, "quick_sum", {"a": 2, "b": 5})
        summed = await reaches(client, optional["taskId"], *TERMINAL, seen=seen)
    assert created["status"] == "working"
    assert task_id.startswith("t1.")
    assert created["ttlMs"] == TTL_S * 1000  # 1.30.0 keeps the ttl the gateway asked for
    assert created["pollIntervalMs"] == 500  # 1.30.0 suggests 500 ms, slower than the route's 250 ms (A29)
    assert working["status"] == "working"
    assert done["status"] == "completed", done
    assert done["result"]["content"] == [{"type": "text", "text": "report: currents"}]
    assert RELATED_TASK not in done["result"].get("_meta", {})
    assert summed["status"] == "completed", summed
    assert text_of(summed["result"]) == "sum 7 (task)"  # run as the server's own task


async def test_with_the_extension_the_elicitation_goes_input_required_and_tasks_update_answers_it(
    legacy_tasks: str, http: aiohttp.ClientSession
) -> None:
    seen: list[dict[str, Any]] = []
    async with running_gateway([tasks_route(legacy_tasks)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "ask_name", {}))["taskId"]
        asking = await reaches(client, task_id, "input_required", *TERMINAL, seen=seen)
        ((key, question),) = asking["inputRequests"].items()
        update = await task_request(client, "tasks/update", task_id, inputResponses={key: accept(name="Grace")})
        done = await reaches(client, task_id, *TERMINAL, seen=seen)
    assert asking["status"] == "input_required", asking
    assert not key.isdigit()
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"] == "What is your name?"
    assert question["params"]["requestedSchema"]["required"] == ["name"]
    assert RELATED_TASK not in question["params"].get("_meta", {})
    assert update.status == 200, update.body
    assert update.result["resultType"] == "complete"
    assert done["status"] == "completed", done
    assert done["result"]["content"] == [{"type": "text", "text": "hello Grace"}]


async def test_a_task_that_fails_upstream_is_failed_not_completed_with_an_empty_result(
    legacy_tasks: str, http: aiohttp.ClientSession
) -> None:
    """1.30.0 marks the task ``failed`` when its work raises, and answers ``tasks/result`` with its
    ``_meta`` alone (no ``CallToolResult``): the gateway's task is ``failed`` (A38), and a client
    without the extension, whose call awaits the backend's task, gets the same error."""
    seen: list[dict[str, Any]] = []
    async with running_gateway([tasks_route(legacy_tasks)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "crash", {}))["taskId"]
        done = await reaches(client, task_id, *TERMINAL, seen=seen)
        plain = await client.call_tool("crash", {}, capabilities=CAPS)  # no extension: awaited in the call
        after = await client.call_tool("quick_sum", {"a": 4, "b": 4}, capabilities=CAPS)
    assert done["status"] == "failed", done
    assert (plain.status, plain.body["error"]) == (
        200,
        {
            "code": INTERNAL_ERROR,
            "message": "The backend's task ended without a tool result",
            "data": done["error"]["data"],
        },
    ), "a client without the extension hears the same failure, never a result without content"
    assert "result" not in done
    assert done["error"] == {
        "code": INTERNAL_ERROR,
        "message": "The backend's task ended without a tool result",
        "data": {"reason": "legacy_task_failed"},
    }
    assert text_of(after.result) == "sum 8"  # the session was given back in working order


async def test_cancel_sends_tasks_cancel_upstream_and_the_task_reads_cancelled(
    legacy_tasks: str, http: aiohttp.ClientSession
) -> None:
    seen: list[dict[str, Any]] = []
    async with running_gateway([tasks_route(legacy_tasks)]) as gw:
        client = BareClient(http, gw.url())
        before = await cancels_seen(client)
        task_id = (await create(client, "hold", {"label": "cancel-me"}))["taskId"]
        working = await reaches(client, task_id, "working", *TERMINAL, seen=seen)
        cancel = await task_request(client, "tasks/cancel", task_id)
        cancelled = await get(client, task_id)

        async def upstream_saw_it() -> dict[str, list[str]] | None:
            now = await cancels_seen(client)
            return now if "cancel-me" in now["noticed"] else None

        after = await eventually(upstream_saw_it, what="the server's work saw its task cancelled", timeout=10)
        later = await get(client, task_id)
    assert "cancel-me" not in before["cancelled"]
    assert working["status"] == "working", working
    assert cancel.status == 200, cancel.body
    assert cancelled["status"] == "cancelled", cancelled
    assert after["cancelled"].count("cancel-me") == 1  # the legacy tasks/cancel, sent once
    assert later["status"] == "cancelled", later  # the server's empty tasks/result answer changes nothing


async def test_a_task_created_on_one_replica_is_polled_answered_and_completed_through_the_other(
    legacy_tasks: str, http: aiohttp.ClientSession
) -> None:
    """The backend session (and its session-scoped task) stays with the owner; the other replica
    forwards every ``tasks/*`` to it."""
    seen: list[dict[str, Any]] = []
    async with running_replicas(2, [tasks_route(legacy_tasks)]) as (owner, other):
        here, there = BareClient(http, owner.url()), BareClient(http, other.url())
        report_id = (await create(here, "slow_report", {"topic": "replicas"}))["taskId"]
        ask_id = (await create(here, "ask_name", {}))["taskId"]
        asking = await reaches(there, ask_id, "input_required", *TERMINAL, seen=seen)
        ((key, _),) = asking["inputRequests"].items()
        update = await task_request(there, "tasks/update", ask_id, inputResponses={key: accept(name="Lin")})
        answered = await reaches(there, ask_id, *TERMINAL, seen=seen)
        reported = await reaches(there, report_id, *TERMINAL, seen=seen)
        same = await get(here, report_id)
    assert asking["status"] == "input_required", asking
    assert update.status == 200, update.body
    assert answered["status"] == "completed", answered
    assert text_of(answered["result"]) == "hello Lin"
    assert reported["status"] == "completed", reported
    assert text_of(reported["result"]) == "report: replicas"
    assert same == reported


def answered(reply: tuple[int, dict[str, Any] | None]) -> bool:
    """HTTP 200 and a JSON-RPC result for the request."""
    status, message = reply
    return status == 200 and message is not None and "result" in message


class LegacySession:
    """A bare 2025-11-25 streamable-HTTP session on the fixture server, no gateway in between."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self._http, self._url = http, url
        self._headers = {"Accept": "application/json, text/event-stream"}
        self._ids = iter(range(1, 1000))

    async def open(self) -> LegacySession:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}
        async with self._http.post(self._url, json=body, headers=self._headers) as resp:
            assert resp.status == 200, await resp.text()
            session_id = resp.headers["Mcp-Session-Id"]
            await resp.read()
        self._headers = {**self._headers, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with self._http.post(self._url, json=initialized, headers=self._headers) as resp:
            assert resp.status == 202, await resp.text()
        return self

    async def request(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        """The HTTP status and the JSON-RPC response to the request (None: the stream ended without it)."""
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        async with self._http.post(self._url, json=body, headers=self._headers) as resp:
            text = await resp.text()
        for line in text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message: dict[str, Any] = json.loads(line[5:])
                if message.get("id") == request_id:
                    return resp.status, message
        return resp.status, None

    async def hold(self, label: str) -> str:
        params = {"name": "hold", "arguments": {"label": label}, "task": {"ttl": 60_000}}
        status, created = await self.request("tools/call", params)
        assert answered((status, created)), (status, created)
        assert created is not None
        task_id: str = created["result"]["task"]["taskId"]
        return task_id

    async def close(self) -> None:
        async with self._http.delete(self._url, headers=self._headers):
            pass


async def test_the_fixture_keeps_its_session_when_a_cancelled_hold_returns(
    legacy_tasks: str, http: aiohttp.ClientSession
) -> None:
    """The fixture server alone: a ``hold`` task's work that sees its task cancelled and returns leaves
    the session that ran it working (the request in flight on it, another task's held ``tasks/result``,
    included). mcp 1.30.0's ``run_task`` completes a returned result unless the work's own copy of its
    task reads terminal; on a task cancelled by ``tasks/cancel`` that copy is stale, ``complete()`` and
    then ``fail()`` raise, and the error ends the server session whose ``TaskSupport`` group the work
    ran in: behind the gateway, a call on that session was cut (502 ``stream_closed``)."""
    one = await LegacySession(http, legacy_tasks).open()
    cancelled, kept = await one.hold("fixture-cancelled"), await one.hold("fixture-kept")
    other = await LegacySession(http, legacy_tasks).open()  # opened after the tasks: their work is not in its group
    held = asyncio.create_task(one.request("tasks/result", {"taskId": kept}))
    try:
        first = await one.request("tasks/cancel", {"taskId": cancelled})

        async def noticed() -> bool:
            status, seen = await other.request("tools/call", {"name": "cancels_seen", "arguments": {}})
            assert answered((status, seen)), (status, seen)
            assert seen is not None
            labels: list[str] = json.loads(text_of(seen["result"]))["noticed"]
            return "fixture-cancelled" in labels

        await eventually(noticed, what="the cancelled hold's work saw its task cancelled", timeout=10)
        after = await one.request("tools/call", {"name": "cancels_seen", "arguments": {}})
        second = await one.request("tasks/cancel", {"taskId": kept})
        ended = await held
    finally:
        held.cancel()
        await one.close()
        await other.close()
    assert answered(first), first
    assert answered(after), after  # the session outlived the cancelled task's work
    assert answered(second), second
    assert answered(ended), ended  # the other task's held tasks/result was not cut
