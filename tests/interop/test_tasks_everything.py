"""Tasks (issue 19) over the published ``@modelcontextprotocol/server-everything@2026.8.31``, streamable
HTTP, behind the gateway, driven by the bare 2026-07-28 client of ``tests/harness.py``.

``simulate-research-query`` is a legacy (2025-11-25, experimental) task tool: ``execution.taskSupport:
"required"``, four one-second stages reported by ``notifications/tasks/status``, and with
``ambiguous: true`` an ``elicitation/create`` sent on the task's ``tasks/result`` stream. Called
without ``params.task`` it answers ``isError`` "requires task augmentation". The gateway passes the
legacy task through (:mod:`gateway.mcptasks.passthrough`): a client that declares the extension gets
a 2026-07-28 task, one that does not gets the result, its question as an MRTR round.

``trigger-long-running-operation`` knows nothing of tasks (progress only); with the route's mode
``always`` it becomes a task the gateway makes, its progress the task's ``statusMessage``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import task_client
from harness import ALL_CAPS, BareClient, accept, running_gateway
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from peers.runner import REPO_ROOT, free_port, run_peer
from task_client import TASKS, declaring
from waiting import eventually

pytestmark = pytest.mark.interop

CAPS: dict[str, Any] = {key: value for key, value in ALL_CAPS.items() if key != "roots"}
"""Elicitation and sampling, no roots: server-everything asks ``roots/list`` 350 ms after a session
starts when the client declares roots, which would be the call's first question here."""
DECLARING = declaring(CAPS)
RELATED_TASK = "io.modelcontextprotocol/related-task"
TTL_S = 600
POLL_MS = 250
WAIT = 30.0
"""Bound on every wait for a task's status (the research takes four seconds; Node may start cold)."""
BACKEND = {"timeout": 60, "connect_timeout": 30}
EVERYTHING = REPO_ROOT / "tests" / "interop" / "published" / "node_modules" / ".bin" / "mcp-server-everything"
TERMINAL = task_client.TERMINAL  # test_tasks_legacy_python.py imports it from here
STAGES = ("Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report...")


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture(scope="module")
def everything(peer_log_dir: Path) -> Iterator[str]:
    """server-everything over streamable HTTP (its port from ``PORT``), shared by the module's tests."""
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing; run `bash scripts/bootstrap.sh` from the repo root", pytrace=False)
    port = free_port()
    with run_peer("everything-tasks", [str(EVERYTHING), "streamableHttp"], port, peer_log_dir, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


tasks_route = partial(task_client.tasks_route, name="everything", backend=BACKEND, ttl=TTL_S, poll_interval_ms=POLL_MS)
# The task client's helpers, declaring CAPS (no roots) and waiting WAIT (test_tasks_legacy_python.py
# imports them too).
task_request = partial(task_client.task_request, capabilities=DECLARING)
get = partial(task_client.get, capabilities=DECLARING)
reaches = partial(task_client.reaches, capabilities=DECLARING, timeout=WAIT)
create = partial(task_client.create, capabilities=DECLARING)


def text_of(result: dict[str, Any]) -> str:
    return " ".join(block["text"] for block in result["content"] if block.get("type") == "text")


async def test_without_the_extension_the_research_query_answers_a_normal_result(
    everything: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(everything)]) as gw:
        client = BareClient(http, gw.url())
        reply = await client.call_tool("simulate-research-query", {"topic": "tides"}, capabilities=CAPS)
    assert reply.status == 200, reply.body
    result = reply.result
    assert result["resultType"] == "complete", result
    assert result.get("isError") is not True, result
    assert text_of(result).startswith("# Research Report: tides\n")
    assert "- Stage 4: Generating report ✓" in text_of(result)
    assert "taskId" not in result
    assert RELATED_TASK not in result.get("_meta", {})


async def test_without_the_extension_the_ambiguous_query_asks_its_question_as_an_mrtr_round(
    everything: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(everything)]) as gw:
        client = BareClient(http, gw.url())
        arguments = {"topic": "python", "ambiguous": True}
        asked = await client.call_tool("simulate-research-query", arguments, capabilities=CAPS)
        assert asked.status == 200, asked.body
        ((key, question),) = asked.result["inputRequests"].items()
        answered = await client.retry(
            "simulate-research-query",
            asked.result["requestState"],
            {key: accept(interpretation="snake")},
            arguments,
            capabilities=CAPS,
        )
    assert asked.result["resultType"] == "input_required", asked.result
    assert question["method"] == "elicitation/create"
    assert "python" in question["params"]["message"]
    assert answered.status == 200, answered.body
    assert answered.result["resultType"] == "complete", answered.result
    assert text_of(answered.result).startswith("# Research Report: python (snake)\n")


async def test_a_required_task_tool_without_the_extension_is_minus_32021_when_the_route_rejects(
    everything: str, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([tasks_route(everything, without_extension="reject")]) as gw:
        client = BareClient(http, gw.url())
        refused = await client.call_tool("simulate-research-query", {"topic": "tides"}, capabilities=CAPS)
        plain = await client.call_tool("echo", {"message": "still served"}, capabilities=CAPS)
    assert refused.status == 400, refused.body
    assert refused.error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY, refused.body
    assert refused.error["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
    assert plain.result["content"][0]["text"] == "Echo: still served"


async def test_with_the_extension_the_research_query_is_a_task_that_completes(
    everything: str, http: aiohttp.ClientSession
) -> None:
    seen: list[dict[str, Any]] = []
    async with running_gateway([tasks_route(everything)]) as gw:
        client = BareClient(http, gw.url())
        created = await create(client, "simulate-research-query", {"topic": "tides"})
        task_id = created["taskId"]
        working = await get(client, task_id)
        done = await reaches(client, task_id, *TERMINAL, seen=seen)
    assert created["status"] == "working"
    assert task_id.startswith("t1.")  # the gateway's sealed id, never the backend's
    assert created["ttlMs"] == 300_000  # the backend's own task lives 5 minutes, less than the route's 600 s
    assert created["pollIntervalMs"] == 1000  # the backend suggests 1 s, slower than the route's 250 ms
    assert working["status"] == "working"
    assert done["status"] == "completed", done
    assert text_of(done["result"]).startswith("# Research Report: tides\n")
    assert RELATED_TASK not in done["result"].get("_meta", {})
    messages = {task.get("statusMessage") for task in seen}
    assert messages & set(STAGES), seen  # the legacy status notifications, as statusMessage


async def test_with_the_extension_the_ambiguous_query_goes_input_required_and_takes_its_answer(
    everything: str, http: aiohttp.ClientSession
) -> None:
    seen: list[dict[str, Any]] = []
    async with running_gateway([tasks_route(everything)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "simulate-research-query", {"topic": "python", "ambiguous": True}))["taskId"]
        asking = await reaches(client, task_id, "input_required", *TERMINAL, seen=seen)
        ((key, question),) = asking["inputRequests"].items()
        update = await task_request(
            client, "tasks/update", task_id, inputResponses={key: accept(interpretation="programming")}
        )
        done = await reaches(client, task_id, *TERMINAL, seen=seen)
    assert asking["status"] == "input_required", asking
    assert not key.isdigit()  # a key the gateway minted, never the backend's JSON-RPC id
    assert question["method"] == "elicitation/create"
    schema = question["params"]["requestedSchema"]
    assert schema["required"] == ["interpretation"]
    assert {choice["const"] for choice in schema["properties"]["interpretation"]["oneOf"]} == {
        "programming",
        "snake",
        "comedy",
    }
    assert update.status == 200, update.body
    assert update.result["resultType"] == "complete"
    assert not {"taskId", "status", "inputRequests", "result"} & set(update.result), update.result
    assert done["status"] == "completed", done
    report = text_of(done["result"])
    assert report.startswith("# Research Report: python (programming)\n")
    assert 'After receiving clarification ("programming")' in report


async def metrics(http: aiohttp.ClientSession, gw: Any) -> str:
    async with http.get(gw.url("/metrics")) as resp:
        assert resp.status == 200
        text: str = await resp.text()
        return text


async def test_cancel_of_a_passed_through_task_cancels_it_upstream_and_the_session_is_kept(
    everything: str, http: aiohttp.ClientSession
) -> None:
    """``tasks/cancel`` sends the legacy ``tasks/cancel``; the backend then ends the held ``tasks/result``
    (its task is over), so the session goes back to the pool idle and the next call reuses it. Had
    only the ``tasks/result`` request been cancelled, the backend would never answer it and the
    session would be closed after the cancel grace."""
    seen: list[dict[str, Any]] = []
    idle = 'mrtr_gateway_backend_sessions_by_state{route="everything",state="idle"} 1.0'
    async with running_gateway([tasks_route(everything)]) as gw:
        client = BareClient(http, gw.url())
        task_id = (await create(client, "simulate-research-query", {"topic": "python", "ambiguous": True}))["taskId"]
        await reaches(client, task_id, "input_required", *TERMINAL, seen=seen)
        cancel = await task_request(client, "tasks/cancel", task_id)
        cancelled = await get(client, task_id)
        back = await eventually(lambda: _has(http, gw, idle), what="the task's session is idle in the pool", timeout=4)
        echoed = await client.call_tool("echo", {"message": "same session"}, capabilities=CAPS)
        after = await metrics(http, gw)
    assert cancel.status == 200, cancel.body
    assert cancelled["status"] == "cancelled", cancelled
    assert idle in back
    assert echoed.result["content"][0]["text"] == "Echo: same session"
    assert 'mrtr_gateway_backend_initializations_total{route="everything"} 1.0' in after


async def _has(http: aiohttp.ClientSession, gw: Any, line: str) -> str | None:
    text = await metrics(http, gw)
    return text if line in text else None


async def test_a_long_running_tool_without_task_support_becomes_a_gateway_task_with_its_progress(
    everything: str, http: aiohttp.ClientSession
) -> None:
    seen: list[dict[str, Any]] = []
    tools = {"trigger-long-running-operation": {"mode": "always"}}
    async with running_gateway([tasks_route(everything, tools=tools)]) as gw:
        client = BareClient(http, gw.url())
        created = await create(client, "trigger-long-running-operation", {"duration": 2, "steps": 4})
        done = await reaches(client, created["taskId"], *TERMINAL, seen=seen)
    assert created["ttlMs"] == TTL_S * 1000
    assert created["pollIntervalMs"] == POLL_MS
    assert done["status"] == "completed", done
    assert text_of(done["result"]) == "Long running operation completed. Duration: 2 seconds, Steps: 4."
    progress = [task["statusMessage"] for task in seen if task["status"] == "working" and "statusMessage" in task]
    assert any(re.fullmatch(r"[1-4]/4", message) for message in progress), seen
