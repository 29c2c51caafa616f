"""Tasks (issue 19, the ``io.modelcontextprotocol/tasks`` extension) made by the gateway over a legacy server
that knows nothing of tasks, on one replica.

The backend is the real legacy fixture server of the conformance run (``tests/peers/conformance_fixture.py``,
``mcp`` 1.30.0 FastMCP, its own process): ``slow_compute`` (silent for ``seconds``), ``confirm_delete`` (one
elicitation), ``multi_input`` (two concurrent elicitations), ``staged_job`` (progress, then silence),
``test_tool_with_task`` (an elicitation, then 2 s of work), ``failing_job``, ``protocol_error_job``, ``greet``,
and two probes of the backend's own view: ``cancelled_calls`` (the ``tools/call`` requests a
``notifications/cancelled`` reached) and ``calls_in_flight`` (the ones still running). The client is the
bare 2026-07-28 client of ``tests/harness.py``; it sends ``Mcp-Name: <taskId>`` on ``tasks/*`` as the spec
asks a client to. Every refusal is asserted as (HTTP status, JSON-RPC code, ``data.reason``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import task_client
from harness import ALL_CAPS, BareClient, Reply, accept, route, running_gateway
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from peers.runner import PEERS_DIR, free_port, legacy_python, run_peer
from task_client import DECLARING, TASK_FIELDS, TASKS, TERMINAL, ack_only, create, get, task_request, until
from waiting import eventually

pytestmark = pytest.mark.interop

TASK_NOT_FOUND = "Failed to retrieve task: Task not found"
TTL_S = 600
POLL_MS = 250
WAIT = 15.0
"""Bound on every wait for a task's status (the longest tool here works 3 s; the machine may be loaded)."""
ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


@pytest.fixture(scope="module")
def fixture_server(peer_log_dir: Path) -> Iterator[str]:
    """The legacy conformance fixture server (``.venv-legacy``), shared by the module's tests."""
    port = free_port()
    argv = [legacy_python(), str(PEERS_DIR / "conformance_fixture.py"), "--port", str(port)]
    with run_peer("tasks-fixture", argv, port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/mcp"


tasks_route = partial(task_client.tasks_route, mode="always", ttl=TTL_S, poll_interval_ms=POLL_MS)
"""A route with tasks on: every tool ``always`` unless the call says otherwise."""
reaches = partial(task_client.reaches, timeout=WAIT)


def triple(reply: Reply) -> tuple[int, int, str | None]:
    """(HTTP status, JSON-RPC code, ``data.reason``) of an error answer."""
    error = reply.error
    data = error.get("data")
    return reply.status, error["code"], data.get("reason") if isinstance(data, dict) else None


def text_of(result: dict[str, Any]) -> str:
    return " ".join(block["text"] for block in result["content"] if block.get("type") == "text")


async def backend_cancelled(client: BareClient, call: dict[str, Any]) -> bool:
    """Whether a ``notifications/cancelled`` reached the backend for ``call`` (``{"tool", "arguments"}``),
    by the backend's own record (``cancelled_calls``, asked through the gateway)."""
    reply = await client.call_tool("cancelled_calls", {}, capabilities=ALL_CAPS)
    assert reply.status == 200, reply.body
    return call in json.loads(reply.text)


async def test_without_the_extension_a_task_tool_answers_a_normal_result(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        reply = await client.call_tool("slow_compute", {"seconds": 0.2, "label": "plain"}, capabilities=ALL_CAPS)
    assert reply.status == 200, reply.body
    assert reply.result["resultType"] == "complete"
    assert not TASK_FIELDS & set(reply.result)
    assert reply.text == "slow_compute plain finished after 0.2s"


async def test_a_declaring_client_gets_a_task_that_resolves_at_once_and_completes(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        created = await create(client, "slow_compute", {"seconds": 2, "label": "lifecycle"})
        task_id = created["taskId"]
        at_once = await get(client, task_id)  # answered only once a tasks/get resolves
        done = await reaches(client, task_id, *TERMINAL)
    assert created["status"] == "working"
    flat = {"resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
    assert flat <= set(created) <= flat | {"statusMessage", "_meta"}, created  # flat: no result, no `task`
    assert ISO_UTC.match(created["createdAt"])
    assert ISO_UTC.match(created["lastUpdatedAt"])
    assert created["ttlMs"] == TTL_S * 1000
    assert created["pollIntervalMs"] == POLL_MS
    assert at_once["status"] == "working"
    assert at_once["createdAt"] == created["createdAt"]
    assert "result" not in at_once
    assert done["status"] == "completed", done
    assert "error" not in done
    assert done["result"]["isError"] is False
    assert text_of(done["result"]) == "slow_compute lifecycle finished after 2s"
    assert "io.modelcontextprotocol/related-task" not in done["result"].get("_meta", {})
    assert "requestState" not in done


async def test_a_tool_error_is_a_completed_task_with_is_error(fixture_server: str, http: aiohttp.ClientSession) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "failing_job", {}))["taskId"]
        done = await reaches(client, task_id, *TERMINAL)
    assert done["status"] == "completed", done
    assert done["result"]["isError"] is True
    assert "failing_job: the job failed" in text_of(done["result"])


async def test_a_json_rpc_error_is_a_failed_task_with_the_error(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "protocol_error_job", {}))["taskId"]
        done = await reaches(client, task_id, *TERMINAL)
    assert done["status"] == "failed", done
    assert "result" not in done
    assert done["error"]["code"] == INTERNAL_ERROR
    assert done["error"]["message"] == "protocol_error_job: simulated internal failure"


async def test_a_question_mid_task_is_input_required_and_tasks_update_answers_it(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "confirm_delete", {"filename": "notes.txt"}))["taskId"]
        asking = await reaches(client, task_id, "input_required", *TERMINAL)
        again = await get(client, task_id)
        ((key, question),) = asking["inputRequests"].items()
        malformed = await task_request(
            client, "tasks/update", task_id, inputResponses={key: {"action": "accept", "content": "yes"}}
        )
        still_asking = await get(client, task_id)
        ack_only(await task_request(client, "tasks/update", task_id, inputResponses={key: accept(confirm=True)}))
        done = await reaches(client, task_id, *TERMINAL)
    assert asking["status"] == "input_required", asking
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"] == "Delete notes.txt?"
    assert question["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    assert again["inputRequests"] == asking["inputRequests"]  # the same key on every poll until answered
    assert triple(malformed) == (400, INVALID_PARAMS, None), malformed.body  # nothing of it applied:
    assert still_asking["inputRequests"] == asking["inputRequests"]
    assert done["status"] == "completed", done
    assert text_of(done["result"]) == "deleted notes.txt"


async def test_partial_answers_keep_the_task_input_required_until_every_question_is_answered(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "multi_input", {}))["taskId"]

        async def both_asked() -> dict[str, Any] | None:
            task = await get(client, task_id)
            return task if task["status"] == "input_required" and len(task["inputRequests"]) == 2 else None

        asking = await eventually(both_asked, what="both questions outstanding", timeout=WAIT)
        by_message = {q["params"]["message"]: key for key, q in asking["inputRequests"].items()}
        first, second = by_message["First input?"], by_message["Second input?"]

        # A key that is not outstanding is ignored (its value is not even an answer).
        ack_only(await task_request(client, "tasks/update", task_id, inputResponses={"unknown-key": {"x": 1}}))
        unchanged = await get(client, task_id)
        ack_only(await task_request(client, "tasks/update", task_id, inputResponses={first: accept(name="one")}))
        partly = await get(client, task_id)
        ack_only(await task_request(client, "tasks/update", task_id, inputResponses={second: accept(name="two")}))
        done = await reaches(client, task_id, *TERMINAL)
    assert unchanged["status"] == "input_required"
    assert set(unchanged["inputRequests"]) == {first, second}
    assert partly["status"] == "input_required"
    assert set(partly["inputRequests"]) == {second}
    assert done["status"] == "completed", done
    assert text_of(done["result"]) == "multi_input got 2 answer(s): one, two"


async def test_cancel_acks_the_task_is_cancelled_and_the_backend_hears_notifications_cancelled(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    arguments = {"seconds": 30, "label": "cancel-me"}
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "slow_compute", arguments))["taskId"]
        ack_only(await task_request(client, "tasks/cancel", task_id))
        cancelled = await reaches(client, task_id, *TERMINAL)
        await eventually(
            lambda: backend_cancelled(client, {"tool": "slow_compute", "arguments": arguments}),
            what="the backend received notifications/cancelled for the task's call",
            timeout=WAIT,
        )
        ack_only(await task_request(client, "tasks/cancel", task_id))  # a terminal task: the same ack
        still = await get(client, task_id)
    assert cancelled["status"] == "cancelled", cancelled
    assert "result" not in cancelled
    assert "error" not in cancelled
    assert still["status"] == "cancelled"


async def test_cancel_during_a_question_releases_the_backend_call(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    """The backend's pending elicitation is answered (cancelled) or its call cancelled, whichever reaches
    it first: either way the legacy call ends instead of waiting for an answer that will never come."""
    arguments = {"filename": "cancel-while-asking.txt"}
    call = {"tool": "confirm_delete", "arguments": arguments}
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "confirm_delete", arguments))["taskId"]
        await reaches(client, task_id, "input_required")
        running_while_asked = call in await calls_in_flight(client)
        ack_only(await task_request(client, "tasks/cancel", task_id))
        cancelled = await reaches(client, task_id, *TERMINAL)

        async def released() -> bool:
            return call not in await calls_in_flight(client)

        await eventually(released, what="the backend's confirm_delete call ended", timeout=WAIT)
        after = await client.call_tool("greet", {"name": "again"}, capabilities=ALL_CAPS)
    assert running_while_asked
    assert cancelled["status"] == "cancelled", cancelled
    assert "inputRequests" not in cancelled
    assert after.text == "Hello, again!"  # the route still serves calls afterwards


async def calls_in_flight(client: BareClient) -> list[dict[str, Any]]:
    """The backend's own list of the ``tools/call`` requests it is running (``calls_in_flight``)."""
    reply = await client.call_tool("calls_in_flight", {}, capabilities=ALL_CAPS)
    assert reply.status == 200, reply.body
    calls: list[dict[str, Any]] = json.loads(reply.text)
    return calls


async def test_a_tool_silent_past_backend_timeout_completes_as_a_task(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    """``backend.timeout`` (1 s) bounds an interactive call, not a task: the same 3-s silent call is a 502
    for a client without the extension and a completed task for one with it."""
    route_ = tasks_route(fixture_server, backend={"timeout": 1})
    async with running_gateway([route_]) as gw:
        client = BareClient(http, gw.url())
        plain = await client.call_tool("slow_compute", {"seconds": 3, "label": "sync"}, capabilities=ALL_CAPS)
        task_id = (await create(client, "slow_compute", {"seconds": 3, "label": "silent"}))["taskId"]
        done = await reaches(client, task_id, *TERMINAL)
    assert triple(plain) == (502, INTERNAL_ERROR, "backend_unavailable")
    assert plain.error["data"]["cause"] == "timeout"
    assert done["status"] == "completed", done
    assert text_of(done["result"]) == "slow_compute silent finished after 3s"


async def test_progress_of_the_legacy_call_is_the_tasks_status_message(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "staged_job", {"seconds": 3}))["taskId"]
        working = await reaches_message(client, task_id, "halfway")
        done = await reaches(client, task_id, *TERMINAL)
    assert working["status"] == "working"
    assert done["status"] == "completed", done
    assert text_of(done["result"]) == "staged_job finished after 3s"


async def reaches_message(client: BareClient, task_id: str, message: str) -> dict[str, Any]:
    return await until(
        lambda: get(client, task_id),
        lambda task: task.get("statusMessage") == message,
        what=f"statusMessage {message!r}",
        timeout=WAIT,
        interval=0.01,
    )


async def test_mode_after_answers_a_quick_call_as_today_and_a_long_one_as_a_task(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    route_ = tasks_route(fixture_server, mode="off", tools={"slow_compute": {"mode": "after", "after_ms": 1000}})
    async with running_gateway([route_]) as gw:
        client = BareClient(http, gw.url())
        quick = await client.call_tool("slow_compute", {"seconds": 0, "label": "quick"}, capabilities=DECLARING)
        task_id = (await create(client, "slow_compute", {"seconds": 3, "label": "long"}))["taskId"]
        done = await reaches(client, task_id, *TERMINAL)
        off = await client.call_tool("greet", {"name": "off"}, capabilities=DECLARING)
    assert quick.status == 200, quick.body
    assert quick.result["resultType"] == "complete"
    assert quick.text == "slow_compute quick finished after 0s"
    assert done["status"] == "completed", done
    assert text_of(done["result"]) == "slow_compute long finished after 3s"
    assert off.result["resultType"] == "complete"
    assert off.text == "Hello, off!"


async def test_a_question_before_the_threshold_is_an_mrtr_round_and_the_retry_becomes_a_task(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    route_ = tasks_route(fixture_server, mode="off", tools={"test_tool_with_task": {"mode": "after", "after_ms": 500}})
    async with running_gateway([route_]) as gw:
        client = BareClient(http, gw.url())
        first = await client.call_tool("test_tool_with_task", {}, capabilities=DECLARING)
        ((key, _),) = first.result["inputRequests"].items()
        retry = await client.retry(
            "test_tool_with_task", first.result["requestState"], {key: accept(name="Alice")}, capabilities=DECLARING
        )
        task_id = retry.result["taskId"]
        done = await reaches(client, task_id, *TERMINAL)
    assert first.result["resultType"] == "input_required"
    assert "taskId" not in first.result
    assert retry.result["resultType"] == "task"
    assert "requestState" not in retry.result
    assert "inputRequests" not in retry.result
    assert done["status"] == "completed", done
    assert text_of(done["result"]) == "Hello, Alice!"


async def test_a_task_still_running_at_its_ttl_fails_and_its_id_expires_after_retention(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server, ttl=1, retention=2)]) as gw:
        client = BareClient(http, gw.url())
        created = await create(client, "slow_compute", {"seconds": 30, "label": "outlives its ttl"})
        task_id = created["taskId"]
        lost = await reaches(client, task_id, *TERMINAL)

        async def expired() -> Reply | None:
            reply = await task_request(client, "tasks/get", task_id)
            return reply if reply.status != 200 else None

        gone = await eventually(expired, what="the task id expires after ttl + retention", timeout=WAIT)
    assert created["ttlMs"] == 1000
    assert lost["status"] == "failed", lost
    assert lost["error"] == {"code": INTERNAL_ERROR, "message": "Task lost", "data": {"reason": "ttl_elapsed"}}
    assert "result" not in lost
    assert triple(gone) == (400, INVALID_PARAMS, None), gone.body
    assert gone.error["message"] == TASK_NOT_FOUND


async def test_at_the_task_cap_finished_tasks_are_evicted_oldest_first_then_new_tasks_are_refused(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server)], limits={"max_tasks": 3}) as gw:
        client = BareClient(http, gw.url())
        first, second = [(await create(client, "slow_compute", {"seconds": 0, "label": n}))["taskId"] for n in "ab"]
        await reaches(client, first, *TERMINAL)
        await reaches(client, second, *TERMINAL)  # `first` ended first
        running = [(await create(client, "slow_compute", {"seconds": 30, "label": "c"}))["taskId"]]
        running.append((await create(client, "slow_compute", {"seconds": 30, "label": "d"}))["taskId"])
        first_evicted = await task_request(client, "tasks/get", first)
        second_kept = await get(client, second)
        running.append((await create(client, "slow_compute", {"seconds": 30, "label": "e"}))["taskId"])
        second_evicted = await task_request(client, "tasks/get", second)
        refused = await client.call_tool("slow_compute", {"seconds": 30, "label": "f"}, capabilities=DECLARING)
        synchronous = await client.call_tool("slow_compute", {"seconds": 0, "label": "g"}, capabilities=ALL_CAPS)
        ack_only(await task_request(client, "tasks/cancel", running[0]))
        await reaches(client, running[0], *TERMINAL)
        room_again = await create(client, "slow_compute", {"seconds": 30, "label": "h"})
        for task_id in [*running[1:], room_again["taskId"]]:
            ack_only(await task_request(client, "tasks/cancel", task_id))
    assert triple(first_evicted) == (400, INVALID_PARAMS, None), first_evicted.body
    assert second_kept["status"] == "completed"
    assert triple(second_evicted) == (400, INVALID_PARAMS, None), second_evicted.body
    assert triple(refused) == (503, INTERNAL_ERROR, "overloaded"), refused.body
    assert refused.error["data"]["cause"] == "max_tasks"
    assert int(refused.headers["Retry-After"]) > 0
    assert synchronous.text == "slow_compute g finished after 0s"  # the cap bounds tasks, not calls
    assert room_again["status"] == "working"


async def test_unknown_tampered_and_foreign_task_ids_get_one_fixed_minus_32602(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    routes = [tasks_route(fixture_server), tasks_route(fixture_server, name="other", path="/other")]
    async with running_gateway(routes) as gw:
        client = BareClient(http, gw.url())
        other = BareClient(http, gw.url("/other"))
        task_id = (await create(client, "slow_compute", {"seconds": 30, "label": "ids"}))["taskId"]
        middle = len(task_id) // 2
        tampered = task_id[:middle] + ("A" if task_id[middle] != "A" else "B") + task_id[middle + 1 :]
        refusals: dict[tuple[str, str], Reply] = {}
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            extra: dict[str, Any] = {"inputResponses": {}} if method == "tasks/update" else {}
            for label, target, bad_id in (
                ("unknown", client, "tasks-conformance-nonexistent-12345"),
                ("tampered", client, tampered),
                ("truncated", client, task_id[:-4]),
                ("foreign route", other, task_id),
            ):
                refusals[(method, label)] = await task_request(target, method, bad_id, **extra)
        still = await get(client, task_id)
        ack_only(await task_request(client, "tasks/cancel", task_id))
    for case, reply in refusals.items():
        assert triple(reply) == (400, INVALID_PARAMS, None), (case, reply.body)
        assert reply.error["message"] == TASK_NOT_FOUND, case
    assert still["status"] == "working"  # no refusal touched the real task


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_tasks_methods_without_the_extension_are_minus_32021(
    fixture_server: str, http: aiohttp.ClientSession, method: str
) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "slow_compute", {"seconds": 30, "label": f"gate {method}"}))["taskId"]
        extra: dict[str, Any] = {"inputResponses": {}} if method == "tasks/update" else {}
        real = await task_request(client, method, task_id, capabilities=ALL_CAPS, **extra)
        bogus = await task_request(client, method, "gate-test", capabilities=ALL_CAPS, **extra)
        still = await get(client, task_id)
        ack_only(await task_request(client, "tasks/cancel", task_id))
    for reply in (real, bogus):
        assert triple(reply) == (400, MISSING_REQUIRED_CLIENT_CAPABILITY, None), reply.body
        assert TASKS in reply.error["data"]["requiredCapabilities"]["extensions"]
    assert still["status"] == "working"  # a refused tasks/cancel cancelled nothing


async def test_a_tool_the_route_requires_as_a_task_is_minus_32021_without_the_extension(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    route_ = tasks_route(fixture_server, tools={"failing_job": {"mode": "always", "without_extension": "reject"}})
    async with running_gateway([route_]) as gw:
        client = BareClient(http, gw.url())
        refused = await client.call_tool("failing_job", {}, capabilities=ALL_CAPS)
        synchronous = await client.call_tool("slow_compute", {"seconds": 0, "label": "sync"}, capabilities=ALL_CAPS)
    assert triple(refused) == (400, MISSING_REQUIRED_CLIENT_CAPABILITY, None), refused.body
    assert TASKS in refused.error["data"]["requiredCapabilities"]["extensions"]
    assert synchronous.result["resultType"] == "complete"  # the route's default stays `sync`


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
@pytest.mark.parametrize("declared", [True, False], ids=["declaring", "not declaring"])
async def test_removed_tasks_methods_are_method_not_found(
    fixture_server: str, http: aiohttp.ClientSession, method: str, declared: bool
) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        reply = await task_request(
            client, method, "tasks-conformance-isolation-probe", capabilities=DECLARING if declared else ALL_CAPS
        )
    assert triple(reply) == (404, METHOD_NOT_FOUND, None), reply.body
    assert reply.error["message"] == "Method not found"


async def test_a_mismatched_mcp_name_is_minus_32020_and_a_missing_one_is_accepted(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "slow_compute", {"seconds": 30, "label": "names"}))["taskId"]
        mismatched = {
            method: await task_request(client, method, task_id, name_header="wrong-task-id")
            for method in ("tasks/get", "tasks/cancel")
        }
        missing = await task_request(client, "tasks/get", task_id, name_header=None)
        still = await get(client, task_id)
        ack_only(await task_request(client, "tasks/cancel", task_id, name_header=None))
    for method, reply in mismatched.items():
        assert triple(reply) == (400, HEADER_MISMATCH, None), (method, reply.body)
    assert still["status"] == "working"  # the refused tasks/cancel cancelled nothing
    assert missing.status == 200, missing.body
    assert missing.result["taskId"] == task_id


async def test_require_name_header_makes_a_missing_mcp_name_minus_32020(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(fixture_server, require_name_header=True)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "slow_compute", {"seconds": 30, "label": "required name"}))["taskId"]
        missing = await task_request(client, "tasks/get", task_id, name_header=None)
        ack_only(await task_request(client, "tasks/cancel", task_id))
    assert triple(missing) == (400, HEADER_MISMATCH, None), missing.body


async def test_a_route_with_tasks_off_changes_nothing_for_a_declaring_client(
    fixture_server: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([route("plain", "/mcp", fixture_server), tasks_route(fixture_server, path="/t")]) as gw:
        client = BareClient(http, gw.url())
        on = BareClient(http, gw.url("/t"))
        reply = await client.call_tool("slow_compute", {"seconds": 0.2, "label": "off"}, capabilities=DECLARING)
        tasks_get = await task_request(client, "tasks/get", "any-id")
        off_caps = (await client.request("server/discover", capabilities=DECLARING)).result["capabilities"]
        on_caps = (await on.request("server/discover", capabilities=DECLARING)).result["capabilities"]
    assert reply.result["resultType"] == "complete"
    assert reply.text == "slow_compute off finished after 0.2s"
    assert triple(tasks_get) == (404, METHOD_NOT_FOUND, None), tasks_get.body
    assert TASKS not in off_caps.get("extensions", {})
    assert on_caps["extensions"][TASKS] == {}
    assert "tasks" not in on_caps
