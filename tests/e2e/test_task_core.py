"""Tasks the gateway makes of legacy calls that know nothing of tasks, on one replica, against the
in-process fake backend: made at the threshold or at once, polled, answered, cancelled, lost; the
front door's rules for ``tasks/*`` (-32601 off, -32021 without the extension, one fixed -32602)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from fake_backend import FakeBackend, start_fake_backend
from harness import ALL_CAPS, BareClient, Reply, accept, route, running_gateway, serving
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from task_client import DECLARING, TASKS, ack_only, created, get, reaches, task_request, tasks_route
from waiting import eventually

from gateway import keys
from gateway.observability import requests

NOT_FOUND = "Failed to retrieve task: Task not found"
Backend = tuple[FakeBackend, str]
GATEWAY = Path(__file__).resolve().parents[2] / "gateway"


def gateway_tasks() -> list[asyncio.Task[Any]]:
    """Pending tasks running gateway code (not the demo backend's), as ``test_shutdown.py`` finds them."""
    found = []
    for task in asyncio.all_tasks():
        if task.done() or task is asyncio.current_task():
            continue
        files = [Path(frame.f_code.co_filename) for frame in task.get_stack(limit=50)]
        if any(f.is_relative_to(GATEWAY) and not f.is_relative_to(GATEWAY / "demo") for f in files):
            found.append(task)
    return found


def tasks_config(**overrides: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "default": {"mode": "off"},
        "tools": {
            "slow": {"mode": "after", "after_ms": 200},
            "slow_progress": {"mode": "always"},
            "slow_then_ask": {"mode": "always"},
            "rpc_error": {"mode": "always"},
            "ask_city": {"mode": "after", "after_ms": 2000},
            "ask_then_slow": {"mode": "after", "after_ms": 200},
            "echo": {"mode": "always", "without_extension": "reject"},
        },
        **overrides,
    }


@asynccontextmanager
async def tasks_gateway(
    http: aiohttp.ClientSession, url: str, *, backend: dict[str, Any] | None = None, **config: Any
) -> AsyncIterator[BareClient]:
    tasks = config.pop("tasks", tasks_config())
    async with running_gateway([tasks_route(url, name="t", backend=backend, **tasks)], **config) as gw:
        yield BareClient(http, gw.url(), capabilities=dict(DECLARING))


def new_task(reply: Reply) -> str:
    """The id of the task ``reply`` made on this module's route ``t``, as yet untouched, with the
    gateway's defaults (a one-hour ttl, a 2 s poll interval)."""
    task = created(reply)
    assert task["createdAt"] == task["lastUpdatedAt"]
    assert task["ttlMs"] == 3_600_000
    assert task["pollIntervalMs"] == 2000
    task_id: str = task["taskId"]
    assert task_id.startswith("t1.")
    return task_id


async def test_discover_advertises_the_extension_only_where_tasks_are_on(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    routes = [tasks_route(url, name="on", path="/on"), route("off", "/off", url)]
    async with running_gateway(routes) as gw:
        on = (await BareClient(http, gw.url("/on")).request("server/discover")).result
        off = (await BareClient(http, gw.url("/off")).request("server/discover")).result
    assert on["capabilities"]["extensions"] == {TASKS: {}}
    assert "tasks" not in on["capabilities"]
    assert "extensions" not in off["capabilities"]


async def test_tasks_methods_on_a_route_without_tasks_are_unknown(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    async with running_gateway([route("t", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url(), capabilities=dict(DECLARING))
        reply = await task_request(client, "tasks/get", "t1.x")
        assert reply.error["code"] == METHOD_NOT_FOUND
        assert reply.status == 404
        plain = await client.call_tool("slow", {"seconds": 0.3})
        assert plain.result["resultType"] == "complete", "tasks off: a declaring client sees no change"


async def test_removed_methods_stay_unknown_and_the_checks_come_in_order(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    async with tasks_gateway(http, url) as client:
        for method in ("tasks/result", "tasks/list"):
            assert (await client.request(method, {"taskId": "x"})).error["code"] == METHOD_NOT_FOUND
        bare = await task_request(client, "tasks/get", "gate-test")
        assert bare.error == {"code": INVALID_PARAMS, "message": NOT_FOUND}
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            reply = await client.request(method, {"taskId": "gate-test"}, capabilities=ALL_CAPS)
            assert reply.status == 400
            assert reply.error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
            assert reply.error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
        mismatch = await client.request("tasks/get", {"taskId": "gate-test"}, headers={"Mcp-Name": "other"})
        assert mismatch.error["code"] == HEADER_MISMATCH
        unnamed = await client.request("tasks/get", {"taskId": "gate-test"})
        assert unnamed.error["code"] == INVALID_PARAMS, "a missing Mcp-Name is accepted by default"


async def test_a_missing_name_header_is_refused_when_the_route_requires_it(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    async with tasks_gateway(http, url, tasks=tasks_config(require_name_header=True)) as client:
        assert (await client.request("tasks/get", {"taskId": "x"})).error["code"] == HEADER_MISMATCH
        assert (await task_request(client, "tasks/get", "x")).error["code"] == INVALID_PARAMS


@pytest.mark.parametrize("fake_backend", [{"json_response": False}, {"json_response": True}], indirect=True)
async def test_a_silent_call_past_backend_timeout_becomes_a_task_and_completes(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    """A JSON-mode backend sends no response header until the tool ends: that wait is the task's too."""
    _, url = fake_backend
    async with tasks_gateway(http, url, backend={"timeout": 1}) as client:
        reply = await client.call_tool("slow", {"seconds": 2})
        task_id = new_task(reply)
        first = await get(client, task_id)
        assert first["resultType"] == "complete"
        assert first["taskId"] == task_id
        assert first["status"] == "working"
        done = await reaches(client, task_id, "completed")
        assert done["result"]["content"] == [{"type": "text", "text": "slept"}]
        assert done["result"]["isError"] is False
        assert "requestState" not in done


async def test_a_quick_call_is_answered_as_before(http: aiohttp.ClientSession, fake_backend: Backend) -> None:
    _, url = fake_backend
    async with tasks_gateway(http, url) as client:
        quick = await client.call_tool("slow", {"seconds": 0})
        assert quick.result["resultType"] == "complete"
        assert quick.text == "slept"


async def test_without_the_extension_a_call_runs_as_before_or_is_refused_by_its_tool(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    async with tasks_gateway(http, url) as client:
        plain = await client.call_tool("slow", {"seconds": 0.5}, capabilities=ALL_CAPS)
        assert plain.result["resultType"] == "complete"
        refused = await client.call_tool("echo", {"text": "x"}, capabilities=ALL_CAPS)
        assert refused.error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert refused.error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
        legacy = await client.call_tool("slow", {"seconds": 0}, capabilities=ALL_CAPS, extra={"task": {"ttl": 1}})
        assert legacy.result["resultType"] == "complete", "a legacy params.task changes nothing"


async def test_a_question_first_is_an_ordinary_round(http: aiohttp.ClientSession, fake_backend: Backend) -> None:
    _, url = fake_backend
    async with tasks_gateway(http, url) as client:
        first = (await client.call_tool("ask_city")).result
        assert first["resultType"] == "input_required"
        assert "taskId" not in first
        (key,) = first["inputRequests"]
        done = await client.retry("ask_city", first["requestState"], {key: accept(city="Oslo")})
        assert done.result["resultType"] == "complete"
        assert done.text == "city=Oslo"


async def test_questions_inside_a_task_are_answered_through_tasks_update(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    async with tasks_gateway(http, url) as client:
        task_id = new_task(await client.call_tool("slow_then_ask", {"seconds": 0.1}))
        asked = await reaches(client, task_id, "input_required")
        (key,) = asked["inputRequests"]
        assert asked["inputRequests"][key]["method"] == "elicitation/create"
        assert len(key) >= 20, "a key the gateway minted, never the backend's JSON-RPC id"
        ignored = await task_request(client, "tasks/update", task_id, inputResponses={"unknown": {"ignored": True}})
        assert ignored.result == {"resultType": "complete", **_meta(ignored)}
        bad = await task_request(client, "tasks/update", task_id, inputResponses={key: {"action": "maybe"}})
        assert bad.error["code"] == INVALID_PARAMS
        again = await get(client, task_id)
        assert list(again["inputRequests"]) == [key], "nothing applied: the same key is still outstanding"
        assert again["lastUpdatedAt"] == asked["lastUpdatedAt"]
        ack = await task_request(client, "tasks/update", task_id, inputResponses={key: accept(city="Paris")})
        ack_only(ack)
        # A resend of the update (its answer lost on the way back) gets the same acknowledgement, and
        # the answer is not posted twice: the key is no longer outstanding (issue 26).
        resent = await task_request(client, "tasks/update", task_id, inputResponses={key: accept(city="Paris")})
        assert resent.result == ack.result
        done = await reaches(client, task_id, "completed")
        assert done["result"]["content"][0]["text"] == "city=Paris"


def _meta(reply: Reply) -> dict[str, Any]:
    return {"_meta": reply.result["_meta"]} if "_meta" in reply.result else {}


async def test_progress_becomes_the_status_message(http: aiohttp.ClientSession, fake_backend: Backend) -> None:
    _, url = fake_backend
    async with tasks_gateway(http, url) as client:
        task_id = new_task(await client.call_tool("slow_progress", {"seconds": 0.5}))

        async def message() -> str | None:
            result = await get(client, task_id)
            return result.get("statusMessage")

        assert await eventually(message, what="the progress message", timeout=5) == "warming"
        await reaches(client, task_id, "completed")


async def test_a_json_rpc_error_fails_the_task_and_a_tool_error_completes_it(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    tasks = tasks_config(tools={"rpc_error": {"mode": "always"}, "slow": {"mode": "always"}})
    async with tasks_gateway(http, url, tasks=tasks) as client:
        failed = await reaches(client, new_task(await client.call_tool("rpc_error", {"seconds": 0.1})), "failed")
        assert failed["error"]["code"] == INTERNAL_ERROR
        assert "rpc_error" in failed["error"]["message"]
        assert failed["statusMessage"] == failed["error"]["message"]
        assert "result" not in failed
        tool_error = new_task(await client.call_tool("slow", {"seconds": -1}))
        completed = await reaches(client, tool_error, "completed")
        assert completed["result"]["isError"] is True


async def test_cancel_ends_the_task_at_once_and_cancels_the_backend(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    fake, url = fake_backend
    async with tasks_gateway(http, url, tasks=tasks_config(tools={"slow": {"mode": "always"}})) as client:
        task_id = new_task(await client.call_tool("slow", {"seconds": 30}))
        ack_only(await task_request(client, "tasks/cancel", task_id))
        assert (await get(client, task_id))["status"] == "cancelled"
        await eventually(lambda: fake.cancelled, what="notifications/cancelled upstream", timeout=5)
        again = await task_request(client, "tasks/cancel", task_id)
        assert again.result["resultType"] == "complete", "a finished task is acknowledged, unchanged"
        update = await task_request(client, "tasks/update", task_id, inputResponses={"k": accept(city="x")})
        assert update.result["resultType"] == "complete"


async def test_a_task_is_its_callers_alone(http: aiohttp.ClientSession, fake_backend: Backend) -> None:
    _, url = fake_backend
    async with tasks_gateway(http, url, tasks=tasks_config(tools={"slow": {"mode": "always"}})) as client:
        task_id = new_task(await client.call_tool("slow", {"seconds": 0.2}, authorization="Bearer alice"))
        stranger = await client.request(
            "tasks/get", {"taskId": task_id}, headers={"Mcp-Name": task_id}, authorization="Bearer bob"
        )
        assert stranger.error == {"code": INVALID_PARAMS, "message": NOT_FOUND}
        anonymous = await task_request(client, "tasks/get", task_id)
        assert anonymous.error["message"] == NOT_FOUND


async def test_a_task_still_running_at_its_ttl_fails_as_lost(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    tasks = tasks_config(tools={"slow": {"mode": "always"}}, ttl=1, retention=30)
    async with tasks_gateway(http, url, tasks=tasks) as client:
        task_id = created_with_ttl(await client.call_tool("slow", {"seconds": 30}))
        failed = await reaches(client, task_id, "failed", timeout=5)
        assert failed["error"] == {"code": INTERNAL_ERROR, "message": "Task lost", "data": {"reason": "ttl_elapsed"}}


def created_with_ttl(reply: Reply) -> str:
    task = created(reply)
    assert task["ttlMs"] == 1000
    task_id: str = task["taskId"]
    return task_id


async def test_past_the_cap_a_new_task_gets_a_clear_error(http: aiohttp.ClientSession, fake_backend: Backend) -> None:
    _, url = fake_backend
    tasks = tasks_config(tools={"slow": {"mode": "always"}})
    async with tasks_gateway(http, url, tasks=tasks, limits={"max_tasks": 1}) as client:
        first = new_task(await client.call_tool("slow", {"seconds": 30}))
        refused = await client.call_tool("slow", {"seconds": 30})
        assert refused.status == 503
        assert refused.headers["Retry-After"] == "5"
        assert refused.error["data"]["reason"] == "overloaded"
        assert refused.error["data"]["cause"] == "max_tasks"
        await task_request(client, "tasks/cancel", first)
        new_task(await client.call_tool("slow", {"seconds": 0.1}))


@asynccontextmanager
async def asking_server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A legacy server whose tool asks a form elicitation whatever the client declared, then waits for
    ``notifications/cancelled`` (kept in the list) and ends its stream without a response."""
    cancelled: list[dict[str, Any]] = []
    cancel = asyncio.Event()

    async def mcp(request: web.Request) -> web.StreamResponse:
        message = await request.json()
        method, params = message.get("method"), message.get("params") or {}
        if "id" not in message or method is None:  # a notification, or our answer to its question
            if method == "notifications/cancelled":
                cancelled.append(params)
                cancel.set()
            return web.Response(status=202)
        if method != "tools/call":
            init = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "a"}}
            result = init if method == "initialize" else {}
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        ask = {"message": "Which city?", "requestedSchema": {"type": "object", "properties": {}}}
        question = {"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": ask}
        await response.write(f"event: message\ndata: {json.dumps(question)}\n\n".encode())
        await asyncio.wait_for(cancel.wait(), 10)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_route("POST", "/mcp", mcp)
    async with serving(app) as base:
        yield f"{base}/mcp", cancelled


async def test_a_question_the_creating_request_did_not_declare_fails_the_task(http: aiohttp.ClientSession) -> None:
    async with asking_server() as (url, cancelled):
        tasks = {"enabled": True, "default": {"mode": "always"}}
        async with tasks_gateway(http, url, tasks=tasks) as client:
            task_id = new_task(await client.call_tool("ask", capabilities={"extensions": {TASKS: {}}}))
            failed = await reaches(client, task_id, "failed")
            assert failed["error"]["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
            assert failed["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
            await eventually(lambda: cancelled, what="the backend's call cancelled", timeout=10)


class Lines:
    """Stands in for the request middleware's logger: keeps each ``request`` line's fields."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append(fields)

    debug = info


async def test_the_request_line_names_the_task_by_digest_only(
    http: aiohttp.ClientSession, fake_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = fake_backend
    lines = Lines()
    monkeypatch.setattr(requests, "log", lines)
    async with tasks_gateway(http, url, tasks=tasks_config(tools={"slow": {"mode": "always"}})) as client:
        task_id = new_task(await client.call_tool("slow", {"seconds": 0.1}))
        await reaches(client, task_id, "completed")
    made, *polls = [line for line in lines.lines if line.get("task") is not None]
    assert made["outcome"] == "task"
    assert made["task_status"] == "working"
    assert {line["task"] for line in polls} == {made["task"]}, "one digest joins a task's requests"
    assert polls[-1]["task_status"] == "completed"
    assert task_id not in repr(lines.lines)


async def test_shutdown_with_a_running_task_leaves_no_pending_task(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    fake, url = fake_backend
    async with tasks_gateway(http, url, tasks=tasks_config(tools={"slow": {"mode": "always"}})) as client:
        new_task(await client.call_tool("slow", {"seconds": 30}))
    assert fake.cancelled, "the backend's work was cancelled"
    assert gateway_tasks() == []


async def test_a_question_first_then_long_work_becomes_a_task_on_the_retry(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    async with tasks_gateway(http, url) as client:
        first = (await client.call_tool("ask_then_slow", {"seconds": 0.5})).result
        assert first["resultType"] == "input_required"
        (key,) = first["inputRequests"]
        retry = await client.retry("ask_then_slow", first["requestState"], {key: accept(city="Rome")}, {"seconds": 0.5})
        task_id = new_task(retry)
        done = await reaches(client, task_id, "completed")
        assert done["result"]["content"][0]["text"] == "city=Rome"


async def test_a_draining_replica_makes_no_task(http: aiohttp.ClientSession, fake_backend: Backend) -> None:
    """A retry is still served while draining (its call is held here), but runs on as an ordinary call."""
    _, url = fake_backend
    async with running_gateway([tasks_route(url, name="t", **tasks_config())]) as gw:
        client = BareClient(http, gw.url(), capabilities=dict(DECLARING))
        first = (await client.call_tool("ask_then_slow", {"seconds": 0.5})).result
        (key,) = first["inputRequests"]
        gw.app[keys.DRAIN].begin()
        retry = await client.retry("ask_then_slow", first["requestState"], {key: accept(city="Rome")}, {"seconds": 0.5})
        assert retry.result["resultType"] == "complete"
        assert retry.text == "city=Rome"


async def test_a_result_larger_than_the_route_keeps_fails_the_task(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    tasks = tasks_config(tools={"echo": {"mode": "always"}}, max_result_bytes=1024)
    async with tasks_gateway(http, url, tasks=tasks) as client:
        failed = await reaches(client, new_task(await client.call_tool("echo", {"text": "x" * 2000})), "failed")
        assert failed["error"]["data"] == {"reason": "result_too_large"}
        small = await reaches(client, new_task(await client.call_tool("echo", {"text": "x"})), "completed")
        assert small["result"]["content"][0]["text"] == "x"


async def test_a_backend_that_goes_away_fails_its_tasks(http: aiohttp.ClientSession) -> None:
    runner, url = await start_fake_backend()
    try:
        async with tasks_gateway(http, url, tasks=tasks_config(tools={"slow": {"mode": "always"}})) as client:
            task_id = new_task(await client.call_tool("slow", {"seconds": 30}))
            await runner.cleanup()
            failed = await reaches(client, task_id, "failed")
            assert failed["error"]["data"] == {"reason": "backend_gone"}
    finally:
        await runner.cleanup()
