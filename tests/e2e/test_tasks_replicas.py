"""Tasks across replicas with nothing shared (issue 19): any replica answers ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` for a task another replica owns by forwarding the request over
the authenticated replica hop; an owner that is provably gone makes the task ``failed`` with
``data.reason`` ``owner_gone`` within ``replicas.forward_timeout`` + 1 s; one that merely does not
answer is not gone; a stopping replica answers until its drain deadline, then ends its running tasks
``failed`` with ``replica_stopped``. Real gateway apps (and one ``python -m gateway serve`` process,
killed) in front of the in-process fake legacy backend, whose tools know nothing of tasks."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from fake_backend import FakeBackend
from harness import (
    TEST_KEY,
    BareClient,
    GatewayHandle,
    Reply,
    _free_port,
    accept,
    running_gateway,
    running_replicas,
    start_serve,
)
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from task_client import DECLARING, ack_only, create, get, reaches, task_request, tasks_route
from waiting import eventually, until_status

from gateway import keys
from gateway.app import build_app
from gateway.config.load import parse_config
from gateway.errors import OVERLOADED
from gateway.observability.metrics.forwards import FORWARDED, OWNER_UNREACHABLE, OWNER_UNRESPONSIVE

NOT_FOUND = "Failed to retrieve task: Task not found"
FORWARD_TIMEOUT = 2.0
Backend = tuple[FakeBackend, str]


def owner_gone_error() -> dict[str, Any]:
    return {"code": INTERNAL_ERROR, "message": "Task lost", "data": {"reason": "owner_gone"}}


def replica_route(url: str, **tools: dict[str, Any]) -> dict[str, Any]:
    """The route every replica serves: tasks on for ``tools``, ``backend.timeout`` left at its default."""
    config = tasks_route(url, name="t", mode="off", tools=tools)
    del config["backend"]["timeout"]  # the default (30 s): a task is not bounded by it
    return config


def client(handle: GatewayHandle | str, http: aiohttp.ClientSession, **kw: Any) -> BareClient:
    url = handle if isinstance(handle, str) else handle.url()
    return BareClient(http, url, capabilities=dict(DECLARING), **kw)


def forwards(handle: GatewayHandle, outcome: str) -> float:
    value: float = handle.app[keys.METRICS].forwards.labels("t", outcome)._value.get()
    return value


async def test_a_task_silent_past_backend_timeout_completes_through_either_replica(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    """The issue's case, in real time: a tool with no task support silent for 60 s, behind a route
    whose backend.timeout is its default 30 s, becomes a task for a declaring client (mode after);
    the replica that does not own it answers every tasks/get, and the owner's answers are the same."""
    _, url = fake_backend
    async with running_replicas(2, [replica_route(url, slow={"mode": "after", "after_ms": 500})]) as (owner, other):
        assert owner.app[keys.SETTINGS].config.routes[0].backend.timeout == 30
        task_id = (await create(client(owner, http), "slow", {"seconds": 60}))["taskId"]
        there, here = client(other, http), client(owner, http)
        working = await get(there, task_id)
        assert working["status"] == "working"
        assert working == await get(here, task_id), "the owner's answer, relayed unchanged"
        done = await reaches(there, task_id, "completed", timeout=120, interval=1.0)
        assert done["result"]["content"] == [{"type": "text", "text": "slept"}]
        assert done["result"]["isError"] is False
        assert done["createdAt"] == working["createdAt"]
        assert done == await get(here, task_id)
        assert forwards(other, FORWARDED) >= 3
        assert forwards(owner, FORWARDED) == 0


async def test_a_question_and_progress_appear_on_the_other_replica_and_tasks_update_there_answers(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    _, url = fake_backend
    tools = {"slow_then_ask": {"mode": "always"}, "slow_progress": {"mode": "always"}}
    async with running_replicas(2, [replica_route(url, **tools)]) as (owner, other):
        there = client(other, http, authorization="Bearer alice")
        mine = client(owner, http, authorization="Bearer alice")
        task_id = (await create(mine, "slow_then_ask", {"seconds": 0.1}))["taskId"]
        asked = await reaches(there, task_id, "input_required", timeout=10)
        (key,) = asked["inputRequests"]
        assert asked["inputRequests"][key]["method"] == "elicitation/create"
        stranger = await task_request(client(other, http, authorization="Bearer bob"), "tasks/get", task_id)
        assert (stranger.status, stranger.error) == (400, {"code": INVALID_PARAMS, "message": NOT_FOUND})
        anonymous = await task_request(client(other, http), "tasks/update", task_id, inputResponses={})
        assert (anonymous.status, anonymous.error) == (400, {"code": INVALID_PARAMS, "message": NOT_FOUND})
        ack_only(await task_request(there, "tasks/update", task_id, inputResponses={key: accept(city="Paris")}))
        done = await reaches(there, task_id, "completed", timeout=10)
        assert done["result"]["content"][0]["text"] == "city=Paris"

        progress_id = (await create(client(owner, http), "slow_progress", {"seconds": 1}))["taskId"]

        async def message() -> str | None:
            return (await get(client(other, http), progress_id)).get("statusMessage")

        assert await eventually(message, what="the progress message on the other replica", timeout=10) == "warming"


async def test_tasks_cancel_through_the_other_replica_cancels_the_backend_call(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    fake, url = fake_backend
    async with running_replicas(2, [replica_route(url, slow={"mode": "always"})]) as (owner, other):
        task_id = (await create(client(owner, http), "slow", {"seconds": 30}))["taskId"]
        there = client(other, http)
        assert (await get(there, task_id))["status"] == "working"
        assert fake.cancelled == []
        ack_only(await task_request(there, "tasks/cancel", task_id))
        assert (await get(there, task_id))["status"] == "cancelled"
        assert (await get(client(owner, http), task_id))["status"] == "cancelled"
        await eventually(lambda: fake.cancelled, what="notifications/cancelled upstream", timeout=10)
        assert len(fake.cancelled) == 1


def _owner_config(tmp_path: Path, url: str, port: int) -> Path:
    config = tmp_path / "owner.yaml"
    config.write_text(
        json.dumps(
            {
                "state": {"keys": [TEST_KEY]},
                "replica_id": "owner",
                "logging": {"level": "warning"},
                "listen": {"host": "127.0.0.1", "port": port},
                "replicas": {"advertise_url": f"http://127.0.0.1:{port}"},
                "routes": [replica_route(url, slow={"mode": "always"})],
            }
        ),
        encoding="utf-8",
    )
    return config


async def _timed(reply: Any) -> tuple[Reply, float]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with asyncio.timeout(FORWARD_TIMEOUT + 5):
        answer: Reply = await reply
    return answer, loop.time() - started


async def test_an_owner_killed_mid_task_makes_the_task_failed_owner_gone_on_the_other_replica(
    http: aiohttp.ClientSession, fake_backend: Backend, tmp_path: Path
) -> None:
    """The owner is a gateway process killed with SIGKILL while its task runs: the other replica
    finds no one at its address and answers the task ``failed`` (owner_gone) within forward_timeout + 1 s."""
    _, url = fake_backend
    port = _free_port()
    owner = await start_serve(_owner_config(tmp_path, url, port))
    try:
        await until_status(http, f"http://127.0.0.1:{port}/healthz", timeout=30)
        task_id = (await create(client(f"http://127.0.0.1:{port}/mcp", http), "slow", {"seconds": 60}))["taskId"]
        routes = [replica_route(url, slow={"mode": "always"})]
        async with running_gateway(routes, replica_id="other", replicas={"forward_timeout": FORWARD_TIMEOUT}) as other:
            there = client(other, http)
            assert (await get(there, task_id))["status"] == "working"
            owner.send_signal(signal.SIGKILL)
            assert await owner.wait() == -signal.SIGKILL
            reply, seconds = await _timed(task_request(there, "tasks/get", task_id))
            assert seconds < FORWARD_TIMEOUT + 1.0, f"answered after {seconds:.2f} s"
            assert reply.status == 200, reply
            failed = reply.result
            assert (failed["resultType"], failed["taskId"], failed["status"]) == ("complete", task_id, "failed")
            assert failed["error"] == owner_gone_error()
            assert failed["statusMessage"] == "Task lost"
            assert not {"result", "inputRequests"} & set(failed)
            update = await task_request(there, "tasks/update", task_id, inputResponses={"k": accept(city="x")})
            cancel = await task_request(there, "tasks/cancel", task_id)
            assert (update.status, update.result, cancel.status, cancel.result) == (
                200,
                {"resultType": "complete"},
                200,
                {"resultType": "complete"},
            ), "a lost task is answered as a finished one"
            assert forwards(other, OWNER_UNREACHABLE) == 3
            stranger = await task_request(client(other, http, authorization="Bearer bob"), "tasks/get", task_id)
            assert (stranger.status, stranger.error) == (400, {"code": INVALID_PARAMS, "message": NOT_FOUND})
    finally:
        if owner.returncode is None:
            owner.kill()
        await owner.wait()


async def test_an_owner_that_does_not_answer_is_not_gone(
    http: aiohttp.ClientSession, fake_backend: Backend, silent_owner: str
) -> None:
    """As for a held call: an owner that may resume is never declared gone; the request is refused as
    retryable (HTTP 503, Retry-After) after forward_timeout, and the task runs on."""
    _, url = fake_backend
    routes = [replica_route(url, slow={"mode": "always"})]
    async with (
        running_gateway(routes, replica_id="a", replicas={"advertise_url": silent_owner}) as a,
        running_gateway(routes, replica_id="b", replicas={"forward_timeout": FORWARD_TIMEOUT}) as b,
    ):
        task_id = (await create(client(a, http), "slow", {"seconds": 30}))["taskId"]
        reply, seconds = await _timed(task_request(client(b, http), "tasks/get", task_id))
        assert FORWARD_TIMEOUT <= seconds < FORWARD_TIMEOUT + 1.0, f"answered after {seconds:.2f} s"
        assert (reply.status, reply.headers["Retry-After"]) == (503, "5")
        assert reply.error["code"] == INTERNAL_ERROR
        assert (reply.error["data"]["reason"], reply.error["data"]["cause"]) == (OVERLOADED, OWNER_UNRESPONSIVE)
        assert forwards(b, OWNER_UNRESPONSIVE) == 1
        assert (await get(client(a, http), task_id))["status"] == "working", "the task runs on"


@asynccontextmanager
async def _replica(
    name: str, routes: list[dict[str, Any]], port: int | None = None, **listen: Any
) -> AsyncIterator[GatewayHandle]:
    """One replica on ``port`` (a free one by default), advertising it (as ``running_replicas``), with
    ``listen`` settings."""
    port = port or _free_port()
    data = {
        "state": {"keys": [TEST_KEY]},
        "replica_id": name,
        "listen": {"host": "127.0.0.1", "port": port, **listen},
        "replicas": {"advertise_url": f"http://127.0.0.1:{port}", "forward_timeout": FORWARD_TIMEOUT},
        "routes": routes,
    }
    runner = web.AppRunner(build_app(parse_config(data, env={})), access_log=None, shutdown_timeout=5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield GatewayHandle(runner.app, f"http://127.0.0.1:{port}", runner)
    finally:
        await runner.cleanup()


async def test_a_stopping_replica_answers_until_its_drain_deadline_then_its_tasks_fail(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    fake, url = fake_backend
    routes = [replica_route(url, slow={"mode": "always"})]
    async with _replica("owner", routes, drain_timeout=1) as owner, _replica("other", routes) as other:
        task_id = (await create(client(owner, http), "slow", {"seconds": 30}))["taskId"]
        drain = owner.app[keys.DRAIN]
        drain.begin()
        refused = await client(owner, http).call_tool("slow", {"seconds": 30})
        assert (refused.status, refused.error["data"]["reason"]) == (503, "draining"), "no new task"
        waiting = asyncio.create_task(drain.wait())
        assert (await get(client(other, http), task_id))["status"] == "working"
        assert not waiting.done(), "a replica that keeps a task drains to its deadline"
        async with asyncio.timeout(10):
            assert await waiting is False
        ended = owner.app[keys.METRICS].tasks_ended.labels("t", "failed", "replica_stopped")
        assert ended._value.get() == 0
        assert owner.runner is not None
        await owner.runner.cleanup()
        assert ended._value.get() == 1, "the task still running at the deadline ended failed (replica_stopped)"
        await eventually(lambda: fake.cancelled, what="notifications/cancelled upstream", timeout=10)
        reply, seconds = await _timed(task_request(client(other, http), "tasks/get", task_id))
        assert seconds < FORWARD_TIMEOUT + 1.0
        assert (reply.status, reply.result["status"], reply.result["error"]) == (200, "failed", owner_gone_error())


async def test_an_owner_restarted_or_replaced_at_its_address_is_gone(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    """The other proofs a held call's replay takes: the owner's id with another boot (it restarted),
    or another replica answering a hop at the owner's address."""
    _, url = fake_backend
    routes = [replica_route(url, slow={"mode": "always"})]
    port = _free_port()
    async with _replica("owner", routes, port=port) as first:
        task_id = (await create(client(first, http), "slow", {"seconds": 30}))["taskId"]
    async with _replica("owner", routes, port=port) as restarted:
        reply = await task_request(client(restarted, http), "tasks/get", task_id)
        assert (reply.status, reply.result["status"], reply.result["error"]) == (200, "failed", owner_gone_error())
        assert forwards(restarted, FORWARDED) == 0, "its own id: answered without a hop"
    async with _replica("successor", routes, port=port) as successor, _replica("other", routes) as other:
        via = await task_request(client(other, http), "tasks/get", task_id)
        assert (via.status, via.result["status"], via.result["error"]) == (200, "failed", owner_gone_error())
        assert forwards(other, FORWARDED) == 1, "the hop reached the owner's address; the successor answered"
        cancel = await task_request(client(other, http), "tasks/cancel", task_id)
        assert (cancel.status, cancel.result) == (200, {"resultType": "complete"})
        direct = await task_request(client(successor, http), "tasks/get", task_id)
        assert (direct.status, direct.result["error"]) == (200, owner_gone_error())
        assert forwards(successor, FORWARDED) == 1, "to the owner's address, its own: the hop found no owner"


async def test_an_owner_with_no_address_is_not_declared_gone(
    http: aiohttp.ClientSession, fake_backend: Backend
) -> None:
    """A replica that advertises no address cannot be reached, nor proven gone: retryable, as for a held call."""
    _, url = fake_backend
    routes = [replica_route(url, slow={"mode": "always"})]
    async with running_gateway(routes, replica_id="a") as a, running_gateway(routes, replica_id="b") as b:
        task_id = (await create(client(a, http), "slow", {"seconds": 30}))["taskId"]
        reply = await task_request(client(b, http), "tasks/get", task_id)
        assert (reply.status, reply.error["code"]) == (503, INTERNAL_ERROR)
        assert (reply.error["data"]["reason"], reply.error["data"]["cause"]) == (OVERLOADED, "owner_unknown")
        assert (await get(client(a, http), task_id))["status"] == "working"
