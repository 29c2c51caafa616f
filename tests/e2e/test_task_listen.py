"""``subscriptions/listen`` with ``notifications.taskIds`` (the tasks extension): the acknowledgment
lists only the ids the caller may follow here, then every change of a followed task arrives as
``notifications/tasks`` carrying the whole ``DetailedTask``; a slow stream holds up neither the task
nor other streams, and a stream that ends leaves no change hook behind (docs/conformance.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from fake_backend import FakeBackend
from harness import ALL_CAPS, MODERN, BareClient, accept, route, running_gateway
from mcp_types.jsonrpc import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from task_client import DECLARING, TASKS, ack_only, create, get, reaches, task_request, tasks_route
from waiting import eventually

from gateway import keys
from gateway.listen.translate import SUBSCRIPTION_ID_KEY, Listener

Backend = tuple[FakeBackend, str]


def tasks_config(**tools: dict[str, Any]) -> dict[str, Any]:
    return {
        "enabled": True,
        "default": {"mode": "off"},
        "tools": {
            "slow": {"mode": "always"},
            "slow_then_ask": {"mode": "always"},
            "echo": {"mode": "always"},
            **tools,
        },
    }


@dataclass
class Stream:
    """One listen stream, read message by message."""

    response: aiohttp.ClientResponse

    async def next(self, timeout: float = 10.0) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                line = await self.response.content.readline(max_line_length=4 * 1024 * 1024)
                assert line, "the listen stream ended"
                if line.startswith(b"data:"):
                    message: dict[str, Any] = json.loads(line[5:])
                    return message

    async def task_until(self, task_id: str, status: str) -> list[dict[str, Any]]:
        """Every ``notifications/tasks`` up to the one with ``task_id`` at ``status`` (inclusive)."""
        seen = []
        while True:
            message = await self.next()
            assert message["method"] == "notifications/tasks", message
            seen.append(message)
            if message["params"]["taskId"] == task_id and message["params"]["status"] == status:
                return seen


def listen_body(request_id: str, notifications: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    params = {"_meta": meta, "notifications": notifications}
    return {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params}


@asynccontextmanager
async def listening(
    http: aiohttp.ClientSession,
    url: str,
    notifications: dict[str, Any],
    *,
    request_id: str = "listen-1",
    who: str | None = None,
    capabilities: dict[str, Any] | None = None,
) -> AsyncIterator[Stream]:
    body = listen_body(request_id, notifications, DECLARING if capabilities is None else capabilities)
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen",
    }
    if who is not None:
        headers["Authorization"] = f"Bearer {who}"
    async with http.post(url, data=json.dumps(body), headers=headers) as response:
        yield Stream(response)


async def acknowledged(stream: Stream, request_id: str = "listen-1") -> dict[str, Any]:
    assert stream.response.status == 200
    assert stream.response.content_type == "text/event-stream"
    ack = await stream.next()
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    assert ack["params"]["_meta"] == {SUBSCRIPTION_ID_KEY: request_id}
    notifications: dict[str, Any] = ack["params"]["notifications"]
    return notifications


def as_notified(task: dict[str, Any], subscription_id: str = "listen-1") -> dict[str, Any]:
    """What ``notifications/tasks`` carries for ``task`` (a ``tasks/get`` result)."""
    params = {k: v for k, v in task.items() if k not in ("resultType", "_meta")}
    return {
        "jsonrpc": "2.0",
        "method": "notifications/tasks",
        "params": {**params, "_meta": {SUBSCRIPTION_ID_KEY: subscription_id}},
    }


def watching(gw: Any) -> int:
    count: int = gw.app[keys.DOOR].tasks.table.watching
    return count


async def test_every_change_of_a_followed_task_is_notified_with_its_whole_detailed_task(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    async with running_gateway([tasks_route(url, name="t", **tasks_config())]) as gw:
        client = BareClient(http, gw.url(), capabilities=dict(DECLARING))
        task_id = (await create(client, "slow_then_ask", {"seconds": 2}))["taskId"]
        async with listening(http, gw.url(), {"taskIds": [task_id], "toolsListChanged": True}) as stream:
            assert await acknowledged(stream) == {"taskIds": [task_id], "toolsListChanged": True}
            working = await stream.next()
            assert working["params"]["status"] == "working", "the task as it is when the stream opens"
            asking = await stream.next()
            now = await get(client, task_id)
            assert now["status"] == "input_required"
            assert asking == as_notified(now), "identical to what tasks/get returns at that moment"
            before = {k: v for k, v in now.items() if k != "inputRequests"}
            assert working == as_notified(
                {**before, "status": "working", "lastUpdatedAt": working["params"]["lastUpdatedAt"]}
            )
            (key,) = asking["params"]["inputRequests"]
            assert asking["params"]["inputRequests"][key]["method"] == "elicitation/create"
            ack_only(await task_request(client, "tasks/update", task_id, inputResponses={key: accept(city="Oslo")}))
            rest = await stream.task_until(task_id, "completed")
            assert [m["params"]["status"] for m in rest] == ["working", "completed"]
            assert "inputRequests" not in rest[0]["params"]
            done = await get(client, task_id)
            assert rest[-1] == as_notified(done)
            assert done["result"]["content"] == [{"type": "text", "text": "city=Oslo"}]
            assert watching(gw) == 1
        await eventually(lambda: watching(gw) == 0, what="the stream's change hook removed")


async def test_only_ids_this_caller_may_see_here_are_acknowledged_and_notified(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    routes = [
        tasks_route(url, name="a", path="/a", **tasks_config()),
        tasks_route(url, name="b", path="/b", **tasks_config()),
    ]
    async with (
        running_gateway(routes) as gw,
        running_gateway([tasks_route(url, name="a", path="/a", **tasks_config())], replica_id="other-replica") as other,
    ):
        on_a = BareClient(http, gw.url("/a"), capabilities=dict(DECLARING))
        on_b = BareClient(http, gw.url("/b"), capabilities=dict(DECLARING))
        elsewhere = BareClient(http, other.url("/a"), capabilities=dict(DECLARING))
        mine = (await create(on_a, "slow", {"seconds": 30}, authorization="Bearer alice"))["taskId"]
        other_route = (await create(on_b, "slow", {"seconds": 0.5}, authorization="Bearer alice"))["taskId"]
        other_caller = (await create(on_a, "slow", {"seconds": 0.5}, authorization="Bearer bob"))["taskId"]
        other_replica = (await create(elsewhere, "slow", {"seconds": 0.5}, authorization="Bearer alice"))["taskId"]
        tampered = mine[:-3] + ("AAA" if not mine.endswith("AAA") else "BBB")
        named = [other_route, other_caller, other_replica, tampered, "t1.unknown", 7, mine, mine]
        async with listening(http, gw.url("/a"), {"taskIds": named}, who="alice") as stream:
            assert await acknowledged(stream) == {"taskIds": [mine]}
            assert (await stream.next())["params"]["taskId"] == mine
            for client, task_id, who in (
                (on_b, other_route, "alice"),
                (on_a, other_caller, "bob"),
                (elsewhere, other_replica, "alice"),
            ):
                await reaches(client, task_id, "completed", authorization=f"Bearer {who}")
            ack_only(await task_request(on_a, "tasks/cancel", mine, authorization="Bearer alice"))
            seen = await stream.task_until(mine, "cancelled")
            assert {m["params"]["taskId"] for m in seen} == {mine}, "no other task was ever notified"
        async with listening(http, gw.url("/a"), {"taskIds": [mine]}) as anonymous:
            assert await acknowledged(anonymous) == {"taskIds": []}, "another caller's id is left out"
        await eventually(lambda: watching(gw) == 0, what="the streams' change hooks removed")


async def test_task_ids_without_the_extension_or_not_an_array_are_refused_and_ignored_without_tasks(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    routes = [tasks_route(url, name="t", **tasks_config()), route("off", "/off", url)]
    async with running_gateway(routes) as gw:
        client = BareClient(http, gw.url(), capabilities=dict(DECLARING))
        task_id = (await create(client, "slow", {"seconds": 0.1}))["taskId"]
        async with listening(http, gw.url(), {"taskIds": [task_id]}, capabilities=ALL_CAPS) as refused:
            assert refused.response.status == 400
            error = (await refused.response.json())["error"]
            assert error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
            assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
        async with listening(http, gw.url(), {"taskIds": task_id}) as malformed:
            assert (await malformed.response.json())["error"]["code"] == INVALID_PARAMS
        async with listening(http, gw.url("/off"), {"taskIds": [task_id], "toolsListChanged": True}) as off:
            assert await acknowledged(off) == {"toolsListChanged": True}, "a route without tasks omits taskIds"
        assert watching(gw) == 0
        await eventually(lambda: gw.app[keys.LISTEN_HUBS].stream_count == 0, what="the listen stream ended")


def _listener(gw: Any, subscription_id: str) -> Listener:
    hubs = gw.app[keys.LISTEN_HUBS]
    for hub in hubs._hubs.values():
        for listener in hub._listeners:
            if listener.subscription_id == subscription_id:
                found: Listener = listener
                return found
    raise AssertionError(f"no listener {subscription_id}")


async def test_a_slow_listener_holds_up_neither_the_task_nor_another_listener(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    async with running_gateway([tasks_route(url, name="t", **tasks_config())]) as gw:
        client = BareClient(http, gw.url(), capabilities=dict(DECLARING))
        text = "x" * 900_000
        big = [(await create(client, "echo", {"text": text}))["taskId"] for _ in range(24)]
        for task_id in big:
            await reaches(client, task_id, "completed")
        task_id = (await create(client, "slow_then_ask", {"seconds": 0.5}))["taskId"]
        async with AsyncExitStack() as streams:
            # The slow stream reads nothing past its response headers: about 21 MB of results wait for it.
            slow = await streams.enter_async_context(
                listening(http, gw.url(), {"taskIds": [*big, task_id]}, request_id="slow")
            )
            assert slow.response.status == 200
            fast = await streams.enter_async_context(
                listening(http, gw.url(), {"taskIds": [task_id]}, request_id="fast")
            )
            assert await acknowledged(fast, "fast") == {"taskIds": [task_id]}
            async with asyncio.timeout(10):
                asking = (await fast.task_until(task_id, "input_required"))[-1]
                (key,) = asking["params"]["inputRequests"]
                assert (await get(client, task_id))["status"] == "input_required"
                await task_request(client, "tasks/update", task_id, inputResponses={key: accept(city="Rome")})
                await fast.task_until(task_id, "completed")
                assert (await get(client, task_id))["status"] == "completed"
            stalled = _listener(gw, "slow")
            assert stalled.tasks_due[task_id]["params"]["status"] == "completed", (
                "the stalled stream keeps the task's latest state only, still unwritten"
            )
            assert await acknowledged(slow, "slow") == {"taskIds": [*big, task_id]}
            followed = [await slow.next(timeout=30) for _ in range(len(big) + 1)]
            assert [m["params"]["taskId"] for m in followed] == [*big, task_id]
            assert followed[-1]["params"]["status"] == "completed", "the states in between were skipped"
            assert followed[-1]["params"]["result"]["content"][0]["text"] == "city=Rome"
            assert all(m["params"]["result"]["content"][0]["text"] == text for m in followed[:-1])
        await eventually(lambda: watching(gw) == 0, what="both streams' change hooks removed")


async def test_every_stream_that_ends_removes_its_change_hooks(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    async with running_gateway([tasks_route(url, name="t", **tasks_config())]) as gw:
        client = BareClient(http, gw.url(), capabilities=dict(DECLARING))
        first, second = [(await create(client, "slow", {"seconds": 30}))["taskId"] for _ in range(2)]
        async with AsyncExitStack() as streams:
            one = await streams.enter_async_context(
                listening(http, gw.url(), {"taskIds": [first, second]}, request_id="one")
            )
            assert await acknowledged(one, "one") == {"taskIds": [first, second]}
            async with listening(http, gw.url(), {"taskIds": [first]}, request_id="two") as two:
                assert await acknowledged(two, "two") == {"taskIds": [first]}
                assert watching(gw) == 3
            await eventually(lambda: watching(gw) == 2, what="the closed stream's hook removed")
            for task_id in (first, second):
                await task_request(client, "tasks/cancel", task_id)
            seen = await one.task_until(second, "cancelled")
            assert {(m["params"]["taskId"], m["params"]["status"]) for m in seen} >= {
                (first, "cancelled"),
                (second, "cancelled"),
            }
        await eventually(lambda: watching(gw) == 0, what="every change hook removed")
        await eventually(lambda: gw.app[keys.LISTEN_HUBS].stream_count == 0, what="every listen stream ended")


async def test_a_task_evicted_while_followed_drops_its_hook_and_the_stream_goes_on(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    routes = [tasks_route(url, name="t", **tasks_config())]
    async with running_gateway(routes, limits={"max_tasks_per_principal": 2}) as gw:
        client = BareClient(http, gw.url(), capabilities=dict(DECLARING))
        finished, running = [(await create(client, "slow", {"seconds": 30}))["taskId"] for _ in range(2)]
        await task_request(client, "tasks/cancel", finished)
        async with listening(http, gw.url(), {"taskIds": [finished, running]}) as stream:
            assert await acknowledged(stream) == {"taskIds": [finished, running]}
            assert watching(gw) == 2
            await create(client, "slow", {"seconds": 30})  # past the cap: the finished task is evicted
            assert watching(gw) == 1, "the evicted task's hook went with it"
            assert (await task_request(client, "tasks/get", finished)).error["code"] == INVALID_PARAMS
            await task_request(client, "tasks/cancel", running)
            seen = await stream.task_until(running, "cancelled")
            assert {m["params"]["taskId"] for m in seen} == {finished, running}
        await eventually(lambda: watching(gw) == 0, what="every change hook removed")
