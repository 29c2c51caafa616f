"""The tasks differential (issue 19): the gateway in front of a legacy server against the native tasks server.

The native side is ``fastmcp[tasks]==4.1.4`` with ``fastmcp-tasks==4.1.4`` (``.venv-tasks``,
``tests/peers/native_tasks_server.py``), the one server that serves ``io.modelcontextprotocol/tasks``
natively. The gateway side is a route with tasks on (every tool ``always``) in front of the legacy fixture
server (``tests/peers/conformance_fixture.py``, mcp 1.30.0 FastMCP), whose tools know nothing of tasks. The
two offer the same tools under the same names with the same questions and answers (``slow_compute``,
``staged_job``, ``failing_job``, ``protocol_error_job``, ``confirm_delete``, ``multi_input``, ``greet``).

One client drives both: the bare 2026-07-28 client of ``tests/harness.py``, sending the same JSON-RPC to
each, step for step (create, ``tasks/get`` until terminal, ``input_required`` and ``tasks/update``, cancel,
the errors). Each answer is reduced to its shape by :func:`shape`: task ids, ``inputRequests`` keys and
timestamps are replaced by placeholders (after checking them: one id per task, ISO 8601 UTC times, a
``createdAt`` that never moves), and what remains must be equal. The differences that remain are the
ones in :data:`DOCUMENTED`, each a row of ``docs/conformance.md``; :func:`shape` removes exactly those, and
:func:`test_the_documented_differences_are_still_there` shows each is real (a normalization that hid
nothing would hide a regression too).

The native stack's own client drives both as well (:func:`test_the_native_client_sees_the_same_through_the_gateway`:
``fastmcp_tasks.call_tool_task`` and the transparent ``Client.call_tool``, run under ``.venv-tasks`` by
``native_tasks_server.py --drive``) and must see the same. Its quirks: it sends no ``Mcp-Name`` on ``tasks/*``
(both servers accept that; :func:`test_tasks_methods_without_mcp_name_are_served_alike` does the same with the
bare client), and ``call_tool_task`` raises on an ordinary ``input_required`` answer (no tool here asks before
its task exists: the route makes every call a task at once). The native server does not bind a
task to its caller when no auth is configured; neither server here has auth, so the two look alike (the
gateway binds a task to its principal: ``tests/e2e/test_task_core.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from harness import ALL_CAPS, BareClient, Reply, accept, running_gateway
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from peers.runner import PEERS_DIR, REPO_ROOT, free_port, legacy_python, run_peer
from task_client import DECLARING, TASKS, TERMINAL, NameHeader, created, get, task_request, tasks_route, until

pytestmark = pytest.mark.interop

TASKS_INFO = "io.modelcontextprotocol/serverInfo"
NATIVE_TTL_S = 900
"""The native server's ``ttlMs`` is Docket's default execution TTL (15 min); the gateway's route says the same."""
POLL_MS = 250
WAIT = 15.0
"""Bound on every wait for a task's status (the longest tool here works 1 s; the machine may be loaded)."""
DRIVE_TIMEOUT = 40.0
"""Bound on one run of the native client's driver (its steps take about 5 s)."""

DOCUMENTED: dict[str, str] = {
    "A33": "error messages: the codes, HTTP statuses and data are compared; the messages are each server's "
    "own (the spec's are non-normative), and the native -32601 carries the method name as data",
    "A34": "lastUpdatedAt: the gateway's moves when the task changes; the native server's on every tasks/get",
    "A35": "statusMessage of a completed task: the gateway keeps the legacy call's last progress message; "
    "the native server drops it",
    "A36": "_meta of the inlined result: the gateway's carries serverInfo (it is the tools/call result); the "
    "native server's carries its own fastmcp key; the task result's own _meta is serverInfo on both",
    "A37": "timestamps: the gateway's have milliseconds and Z, the native server's microseconds and +00:00 "
    "(both ISO 8601 UTC)",
}
"""Every difference the comparison allows: its ``docs/conformance.md`` row and what it is."""


def tasks_python() -> str:
    python = os.environ.get("MRTR_TASKS_PYTHON") or str(REPO_ROOT / ".venv-tasks" / "bin" / "python")
    if not Path(python).exists():
        pytest.fail(
            f"tasks interpreter {python} is missing; run `bash scripts/bootstrap.sh` from the repo root "
            "(or point MRTR_TASKS_PYTHON at a python with fastmcp[tasks]==4.1.4 and fastmcp-tasks==4.1.4)",
            pytrace=False,
        )
    return python


@pytest.fixture(scope="module")
def native_tasks_server(peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    argv = [tasks_python(), str(PEERS_DIR / "native_tasks_server.py"), "--port", str(port), "--poll-interval-ms"]
    with run_peer("native-tasks", [*argv, str(POLL_MS)], port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def fixture_server(peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    argv = [legacy_python(), str(PEERS_DIR / "conformance_fixture.py"), "--port", str(port)]
    with run_peer("tasks-differential-fixture", argv, port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/mcp"


def iso_utc(value: object) -> datetime:
    """A task timestamp: ISO 8601 with a zero UTC offset (``Z`` or ``+00:00``)."""
    assert isinstance(value, str), value
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() == timedelta(0), value
    return parsed


@dataclass
class Peer:
    """One side of the differential: the client bound to one server, and what it learnt of its tasks."""

    name: str
    client: BareClient
    send_name: bool = True
    """``Mcp-Name: <taskId>`` on ``tasks/*`` (the spec's client MUST; the native client sends none)."""
    created: dict[str, datetime] = field(default_factory=dict)

    async def call(self, tool: str, arguments: dict[str, Any], *, declaring: bool = True) -> Reply:
        return await self.client.call_tool(tool, arguments, capabilities=DECLARING if declaring else ALL_CAPS)

    @property
    def name_header(self) -> NameHeader | None:
        """What goes in ``Mcp-Name`` on ``tasks/*``: the task's id, or no header (:attr:`send_name`)."""
        return NameHeader.TASK_ID if self.send_name else None

    async def create(self, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        task = created(await self.call(tool, arguments))
        task_id: str = task["taskId"]
        self.created[task_id] = iso_utc(task["createdAt"])
        return task_id, task

    async def task(
        self, method: str, task_id: str, *, name: str | None = None, declaring: bool = True, **params: Any
    ) -> Reply:
        name_header = name if name is not None else self.name_header
        capabilities = DECLARING if declaring else ALL_CAPS
        return await task_request(
            self.client, method, task_id, name_header=name_header, capabilities=capabilities, **params
        )

    async def get(self, task_id: str) -> dict[str, Any]:
        task = await get(self.client, task_id, name_header=self.name_header, capabilities=DECLARING)
        assert iso_utc(task["createdAt"]) == self.created[task_id], (self.name, "createdAt moved", task)
        assert iso_utc(task["lastUpdatedAt"]) >= self.created[task_id], (self.name, task)
        return task

    async def reaches(self, task_id: str, check: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        return await until(lambda: self.get(task_id), check, what=f"{self.name}: {what}", timeout=WAIT)

    async def status(self, task_id: str, *statuses: str) -> dict[str, Any]:
        return await self.reaches(task_id, lambda task: task["status"] in statuses, f"status in {statuses}")


def _meta_shape(meta: dict[str, Any]) -> dict[str, Any]:
    """``_meta``: serverInfo's presence (each server names itself), without the native ``fastmcp`` key (A36)."""
    out = {key: value for key, value in meta.items() if key != "fastmcp"}
    if TASKS_INFO in out:
        out[TASKS_INFO] = "<serverInfo>"
    return out


def shape(body: dict[str, Any]) -> Any:
    """A task answer, result or error reduced to what both servers must agree on (module docstring)."""
    if "error" in body:
        error = body["error"]
        assert isinstance(error["message"], str), body
        assert error["message"], body
        data = None if error["code"] == METHOD_NOT_FOUND else error.get("data")  # A33
        return {"error": {"code": error["code"], "data": data}}
    out = dict(body["result"])
    if "_meta" in out:
        out["_meta"] = _meta_shape(out["_meta"])
    if "taskId" in out:
        out["taskId"] = "<taskId>"
    for stamp in ("createdAt", "lastUpdatedAt"):
        if stamp in out:
            iso_utc(out[stamp])
            out[stamp] = "<time>"  # A34, A37
    if isinstance(out.get("result"), dict):
        out["result"] = {key: value for key, value in out["result"].items() if key != "_meta"}  # A36
    if out.get("status") == "completed":
        out.pop("statusMessage", None)  # A35
    if isinstance(out.get("inputRequests"), dict):
        # Keys are each server's own: the questions, by message, with "<key>" for the key.
        out["inputRequests"] = sorted(
            (request["params"]["message"], "<key>", request) for request in out["inputRequests"].values()
        )
    return out


def keys_by_message(task: dict[str, Any]) -> dict[str, str]:
    return {request["params"]["message"]: key for key, request in task["inputRequests"].items()}


def reply_shape(reply: Reply) -> tuple[int, Any]:
    return reply.status, shape(reply.body)


Scenario = Callable[[Peer], Awaitable[list[Any]]]


@asynccontextmanager
async def peers(fixture_server: str, native_url: str, *, send_name: bool = True) -> AsyncIterator[list[Peer]]:
    route = tasks_route(fixture_server, mode="always", ttl=NATIVE_TTL_S, poll_interval_ms=POLL_MS)
    async with aiohttp.ClientSession() as http, running_gateway([route]) as gw:
        yield [
            Peer("gateway", BareClient(http, gw.url()), send_name=send_name),
            Peer("native", BareClient(http, native_url), send_name=send_name),
        ]


async def differential(
    fixture_server: str, native_url: str, scenario: Scenario, *, send_name: bool = True
) -> list[Any]:
    """Run ``scenario`` against the gateway and against the native server; the transcripts must be equal.

    Returns the gateway's transcript, for the test's own assertions on what the steps saw."""
    async with peers(fixture_server, native_url, send_name=send_name) as (gateway, native):
        ours = await scenario(gateway)
        theirs = await scenario(native)
    assert len(ours) == len(theirs)
    for step, (mine, reference) in enumerate(zip(ours, theirs, strict=True)):
        assert mine == reference, f"step {step}:\n gateway: {mine}\n  native: {reference}"
    return ours


async def lifecycle(peer: Peer) -> list[Any]:
    task_id, created = await peer.create("slow_compute", {"seconds": 2, "label": "lifecycle"})
    at_once = await peer.get(task_id)
    done = await peer.status(task_id, *TERMINAL)
    return [shape({"result": created}), shape({"result": at_once}), shape({"result": done})]


async def test_a_task_is_created_polled_and_completed_alike(fixture_server: str, native_tasks_server: str) -> None:
    created, at_once, done = await differential(fixture_server, native_tasks_server, lifecycle)
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert created["ttlMs"] == NATIVE_TTL_S * 1000
    assert created["pollIntervalMs"] == POLL_MS
    assert not {"result", "error", "inputRequests", "task"} & set(created)
    assert (at_once["resultType"], at_once["status"]) == ("complete", "working")
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "slow_compute lifecycle finished after 2s"}]
    assert done["result"]["isError"] is False


async def progress(peer: Peer) -> list[Any]:
    task_id, _ = await peer.create("staged_job", {"seconds": 1})
    working = await peer.reaches(task_id, lambda task: task.get("statusMessage") == "halfway", "statusMessage")
    done = await peer.status(task_id, *TERMINAL)
    return [shape({"result": working}), shape({"result": done})]


async def test_progress_is_the_status_message_alike(fixture_server: str, native_tasks_server: str) -> None:
    working, done = await differential(fixture_server, native_tasks_server, progress)
    assert (working["status"], working["statusMessage"]) == ("working", "halfway")
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "staged_job finished after 1s"}]


async def errors_of_tools(peer: Peer) -> list[Any]:
    tool_error, _ = await peer.create("failing_job", {})
    protocol_error, _ = await peer.create("protocol_error_job", {})
    return [
        shape({"result": await peer.status(tool_error, *TERMINAL)}),
        shape({"result": await peer.status(protocol_error, *TERMINAL)}),
    ]


async def test_a_tool_error_completes_and_a_json_rpc_error_fails_alike(
    fixture_server: str, native_tasks_server: str
) -> None:
    tool_error, protocol_error = await differential(fixture_server, native_tasks_server, errors_of_tools)
    assert tool_error["status"] == "completed"
    assert tool_error["result"]["isError"] is True
    assert "failing_job: the job failed" in tool_error["result"]["content"][0]["text"]
    assert protocol_error["status"] == "failed"
    assert "result" not in protocol_error
    message = "protocol_error_job: simulated internal failure"
    assert protocol_error["error"] == {"code": INTERNAL_ERROR, "message": message}
    assert protocol_error["statusMessage"] == message  # EXT: a failed task SHOULD carry a statusMessage


async def question(peer: Peer) -> list[Any]:
    task_id, _ = await peer.create("confirm_delete", {"filename": "notes.txt"})
    asking = await peer.status(task_id, "input_required", *TERMINAL)
    again = await peer.get(task_id)
    (key,) = asking["inputRequests"]
    ignored = await peer.task("tasks/update", task_id, inputResponses={"never-issued": accept(confirm=True)})
    still = await peer.get(task_id)
    answered = await peer.task("tasks/update", task_id, inputResponses={key: accept(confirm=True)})
    done = await peer.status(task_id, *TERMINAL)
    assert again["inputRequests"] == asking["inputRequests"], peer.name  # the same key on every poll
    assert still["inputRequests"] == asking["inputRequests"], peer.name
    steps = [shape({"result": asking}), reply_shape(ignored), shape({"result": still})]
    return [*steps, reply_shape(answered), shape({"result": done})]


async def test_a_question_is_input_required_and_tasks_update_answers_it_alike(
    fixture_server: str, native_tasks_server: str
) -> None:
    asking, ignored, still, answered, done = await differential(fixture_server, native_tasks_server, question)
    ((message, _, request),) = asking["inputRequests"]
    assert (asking["status"], message) == ("input_required", "Delete notes.txt?")
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    assert ignored == answered == (200, {"resultType": "complete", "_meta": {TASKS_INFO: "<serverInfo>"}})
    assert still["status"] == "input_required"
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "deleted notes.txt"}]


async def partial(peer: Peer) -> list[Any]:
    task_id, _ = await peer.create("multi_input", {})
    both = await peer.reaches(
        task_id, lambda task: len(task.get("inputRequests", {})) == 2, "both questions outstanding"
    )
    keys = keys_by_message(both)
    await peer.task("tasks/update", task_id, inputResponses={keys["First input?"]: accept(name="one")})
    one_left = await peer.reaches(
        task_id, lambda task: set(task.get("inputRequests", {})) == {keys["Second input?"]}, "one question left"
    )
    await peer.task("tasks/update", task_id, inputResponses={keys["Second input?"]: accept(name="two")})
    done = await peer.status(task_id, *TERMINAL)
    return [shape({"result": both}), shape({"result": one_left}), shape({"result": done})]


async def test_partial_answers_keep_the_task_input_required_alike(
    fixture_server: str, native_tasks_server: str
) -> None:
    both, one_left, done = await differential(fixture_server, native_tasks_server, partial)
    assert [message for message, _, _ in both["inputRequests"]] == ["First input?", "Second input?"]
    assert one_left["status"] == "input_required"
    assert [message for message, _, _ in one_left["inputRequests"]] == ["Second input?"]
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "multi_input got 2 answer(s): one, two"}]


async def cancels(peer: Peer) -> list[Any]:
    working, _ = await peer.create("slow_compute", {"seconds": 30, "label": "cancel-me"})
    cancel = await peer.task("tasks/cancel", working)
    cancelled = await peer.status(working, *TERMINAL)
    again = await peer.task("tasks/cancel", working)  # a terminal task: the same ack
    asking, _ = await peer.create("confirm_delete", {"filename": "cancel-while-asking.txt"})
    await peer.status(asking, "input_required")
    cancel_asking = await peer.task("tasks/cancel", asking)
    cancelled_asking = await peer.status(asking, *TERMINAL)
    late = await peer.task("tasks/update", asking, inputResponses={"any": accept(confirm=True)})
    steps = [reply_shape(cancel), shape({"result": cancelled}), reply_shape(again)]
    return [*steps, reply_shape(cancel_asking), shape({"result": cancelled_asking}), reply_shape(late)]


async def test_cancel_acks_and_the_task_is_cancelled_alike(fixture_server: str, native_tasks_server: str) -> None:
    cancel, cancelled, again, cancel_asking, cancelled_asking, late = await differential(
        fixture_server, native_tasks_server, cancels
    )
    ack = (200, {"resultType": "complete", "_meta": {TASKS_INFO: "<serverInfo>"}})
    assert cancel == again == cancel_asking == late == ack
    for task in (cancelled, cancelled_asking):
        assert task["status"] == "cancelled"
        assert not {"result", "error", "inputRequests"} & set(task)


async def refusals(peer: Peer) -> list[Any]:
    real, _ = await peer.create("slow_compute", {"seconds": 30, "label": "refusals"})
    out: list[Any] = []
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        extra: dict[str, Any] = {"inputResponses": {}} if method == "tasks/update" else {}
        out.append(reply_shape(await peer.task(method, "tasks-differential-unknown-id", **extra)))
        out.append(reply_shape(await peer.task(method, real, declaring=False, **extra)))
        out.append(reply_shape(await peer.task(method, real, name="another-task-id", **extra)))
    for method in ("tasks/list", "tasks/result"):
        out.append(reply_shape(await peer.task(method, real)))
    out.append(shape({"result": await peer.get(real)}))  # no refusal touched the task
    await peer.task("tasks/cancel", real)
    return out


async def test_unknown_ids_undeclared_mismatched_and_removed_methods_are_refused_alike(
    fixture_server: str, native_tasks_server: str
) -> None:
    transcript = await differential(fixture_server, native_tasks_server, refusals)
    *errors, still = transcript
    expected_per_method = [
        (400, {"error": {"code": INVALID_PARAMS, "data": None}}),
        (
            400,
            {
                "error": {
                    "code": MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "data": {"requiredCapabilities": {"extensions": {TASKS: {}}}},
                }
            },
        ),
        (400, {"error": {"code": HEADER_MISMATCH, "data": None}}),
    ]
    removed = (404, {"error": {"code": METHOD_NOT_FOUND, "data": None}})
    assert errors == expected_per_method * 3 + [removed, removed]
    assert still["status"] == "working"


async def test_tasks_methods_without_mcp_name_are_served_alike(fixture_server: str, native_tasks_server: str) -> None:
    """The native client's way (A1): no ``Mcp-Name`` on ``tasks/*``; a whole question-and-answer task."""
    asking, ignored, still, answered, done = await differential(
        fixture_server, native_tasks_server, question, send_name=False
    )
    assert asking["status"] == still["status"] == "input_required"
    assert ignored[0] == answered[0] == 200
    assert done["result"]["content"] == [{"type": "text", "text": "deleted notes.txt"}]


async def without_the_extension(peer: Peer) -> list[Any]:
    plain = await peer.call("slow_compute", {"seconds": 0.2, "label": "plain"}, declaring=False)
    discover = await peer.client.request("server/discover", capabilities=DECLARING)
    assert discover.status == 200, (peer.name, discover.body)
    return [reply_shape(plain), discover.result["capabilities"]["extensions"].get(TASKS)]


async def test_without_the_extension_a_call_is_an_ordinary_result_alike(
    fixture_server: str, native_tasks_server: str
) -> None:
    (status, plain), advertised = await differential(fixture_server, native_tasks_server, without_the_extension)
    assert status == 200
    assert plain["resultType"] == "complete"
    assert plain["content"] == [{"type": "text", "text": "slow_compute plain finished after 0.2s"}]
    assert not {"taskId", "status"} & set(plain)
    assert advertised == {}


async def native_client_drives(url: str) -> dict[str, Any]:
    """What the native client saw of the task tools at ``url`` (``native_tasks_server.py --drive``)."""
    argv = [tasks_python(), str(PEERS_DIR / "native_tasks_server.py"), "--drive", url]
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(DRIVE_TIMEOUT):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode(errors="replace")[-4000:]
    seen: dict[str, Any] = json.loads(out)
    return seen


async def test_the_native_client_sees_the_same_through_the_gateway(
    fixture_server: str, native_tasks_server: str
) -> None:
    """``fastmcp_tasks.call_tool_task`` (create, ``result()`` through ``input_required`` and ``tasks/update``,
    ``cancel()``, ``wait()``) and the transparent ``Client.call_tool`` of a task tool, unchanged."""
    async with peers(fixture_server, native_tasks_server) as (gateway, _):
        through_the_gateway = await native_client_drives(gateway.client.url)
    native = await native_client_drives(native_tasks_server)
    assert through_the_gateway == native
    assert native["created"] == ["working", NATIVE_TTL_S * 1000, POLL_MS, True]
    assert native["slow_compute"] == "slow_compute driven finished after 0.5s"
    assert native["confirm_delete asks"] == ["Delete driven.txt?"]
    assert native["confirm_delete"] == "deleted driven.txt"
    assert native["failing_job"][0] is True
    assert native["protocol_error_job"] == [True, "protocol_error_job: simulated internal failure", "failed"]
    assert native["cancelled"] == "cancelled"
    assert native["multi_input"] == "multi_input got 2 answer(s): first, second"


async def test_the_documented_differences_are_still_there(fixture_server: str, native_tasks_server: str) -> None:
    """Each normalization in :func:`shape` hides a difference that is really there (A33..A37)."""
    raw: dict[str, dict[str, Any]] = {}
    async with peers(fixture_server, native_tasks_server) as sides:
        for peer in sides:
            task_id, created = await peer.create("staged_job", {"seconds": 1})
            # After "halfway" the task does not change for a second: two polls in it see the same task.
            first = await peer.reaches(task_id, lambda task: task.get("statusMessage") == "halfway", "halfway")
            second = await peer.get(task_id)
            done = await peer.status(task_id, *TERMINAL)
            unknown = await peer.task("tasks/get", "tasks-differential-unknown-id")
            removed = await peer.task("tasks/list", task_id)
            raw[peer.name] = {"created": created, "first": first, "second": second, "done": done}
            raw[peer.name] |= {"unknown": unknown.error, "removed": removed.error}
    gateway, native = raw["gateway"], raw["native"]
    # A33: the messages differ, and the native -32601 names the method in data.
    assert gateway["unknown"]["message"] == "Failed to retrieve task: Task not found"
    assert native["unknown"]["message"] != gateway["unknown"]["message"]
    assert "data" not in gateway["removed"]
    assert native["removed"]["data"] == "tasks/list"
    # A34: a tasks/get moves the native lastUpdatedAt, not the gateway's.
    assert gateway["second"]["lastUpdatedAt"] == gateway["first"]["lastUpdatedAt"]
    assert iso_utc(native["second"]["lastUpdatedAt"]) > iso_utc(native["first"]["lastUpdatedAt"])
    # A35: the last progress message stays on the gateway's completed task.
    assert gateway["done"]["statusMessage"] == "finishing"
    assert "statusMessage" not in native["done"]
    # A36: the inlined result's _meta.
    assert TASKS_INFO in gateway["done"]["result"]["_meta"]
    assert native["done"]["result"]["_meta"] == {"fastmcp": {"wrap_result": True}}
    # A37: the same instant, written two ways.
    assert gateway["created"]["createdAt"].endswith("Z")
    assert native["created"]["createdAt"].endswith("+00:00")
    assert sorted(DOCUMENTED) == ["A33", "A34", "A35", "A36", "A37"]
