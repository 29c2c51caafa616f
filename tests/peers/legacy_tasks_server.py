"""A legacy (2025-11-25) task server on ``mcp==1.30.0``: the low-level ``Server`` with its experimental
tasks (``server.experimental.enable_tasks()``), streamable HTTP, stateful, SSE responses.

``enable_tasks()`` declares ``capabilities.tasks`` (``list``, ``cancel``, ``requests.tools.call``) and
answers ``tasks/get``, ``tasks/result``, ``tasks/list`` and ``tasks/cancel`` from an in-memory store; a
``tools/call`` carrying ``params.task`` is answered at once with ``ctx.experimental.run_task(work)``'s
``CreateTaskResult``, and the work's questions (``task.elicit``) are queued and sent on the stream of the
held ``tasks/result`` request. Task ids embed the session's scope: another session's ``tasks/*`` for
them is answered "Task not found". Tools:

* ``slow_report`` (``taskSupport: required``) - works about two seconds in four steps, then answers
  ``report: <topic>``;
* ``ask_name`` (``required``) - asks ``elicitation/create`` (a form with ``name``) through the task,
  then answers ``hello <name>`` (or ``action=<action>`` when not accepted);
* ``hold`` (``required``) - works until its task is cancelled (bounded to two minutes), answering
  ``held <label>``; once cancelled it refreshes its context's copy of the task first, or 1.30.0's
  ``run_task`` would try to complete the cancelled task and end a server session with the error;
* ``quick_sum`` (``optional``) - ``a + b``, as a task when the call asks for one;
* ``crash`` (``required``) - its work raises: 1.30.0 marks the task ``failed`` (the exception's text its
  ``statusMessage``) and answers ``tasks/result`` with the ``related-task`` ``_meta`` alone, no
  ``CallToolResult``;
* ``cancels_seen`` (no task support) - the labels of the ``hold`` tasks this server received
  ``tasks/cancel`` for and whose work then saw its task cancelled, as JSON
  ``{"cancelled": [...], "noticed": [...]}``.

Called without ``params.task``, a ``required`` tool is answered -32601 by ``validate_for_tool`` (the
SDK's answer to a client that ignores ``taskSupport``).

Run it with the legacy interpreter::

    .venv-legacy/bin/python tests/peers/legacy_tasks_server.py --port N
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp.types as types
import uvicorn
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.fastmcp.server import StreamableHTTPASGIApp
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Route

STEP_S = 0.5
HOLD_LIMIT_S = 120.0
TOPIC = {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}
LABEL = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
NUMBERS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
NAME_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Your name"}},
    "required": ["name"],
}


def _tool(name: str, schema: dict[str, Any], support: types.TaskExecutionMode | None) -> types.Tool:
    execution = types.ToolExecution(taskSupport=support) if support is not None else None
    return types.Tool(name=name, description=name, inputSchema=schema, execution=execution)


TOOLS = [
    _tool("slow_report", TOPIC, "required"),
    _tool("ask_name", {"type": "object", "properties": {}}, "required"),
    _tool("hold", LABEL, "required"),
    _tool("quick_sum", NUMBERS, "optional"),
    _tool("crash", {"type": "object", "properties": {}}, "required"),
    _tool("cancels_seen", {"type": "object", "properties": {}}, None),
]


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def build_server() -> Server[Any, Any]:
    server: Server[Any, Any] = Server("mrtr-legacy-tasks-peer")
    support = server.experimental.enable_tasks()
    labels: dict[str, str] = {}
    """``hold`` tasks by legacy task id: their labels."""
    cancelled: list[str] = []
    noticed: list[str] = []

    default_cancel = server.request_handlers[types.CancelTaskRequest]

    async def record_cancel(req: types.CancelTaskRequest) -> types.ServerResult:
        answer = await default_cancel(req)  # the SDK's own (scope check, terminal check, store update)
        label = labels.get(req.params.taskId)
        if label is not None:
            cancelled.append(label)
        return answer

    server.request_handlers[types.CancelTaskRequest] = record_cancel

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return TOOLS

    async def slow_report(task: ServerTaskContext, topic: str) -> types.CallToolResult:
        for step in range(1, 5):
            await task.update_status(f"step {step}/4")
            await anyio.sleep(STEP_S)
        return _text(f"report: {topic}")

    async def ask_name(task: ServerTaskContext) -> types.CallToolResult:
        answer = await task.elicit("What is your name?", NAME_FORM)  # type: ignore[arg-type]
        if answer.action != "accept" or answer.content is None:
            return _text(f"action={answer.action}")
        return _text(f"hello {answer.content.get('name')}")

    async def crash(task: ServerTaskContext) -> types.CallToolResult:
        raise RuntimeError("the work broke")

    async def hold(task: ServerTaskContext, label: str) -> types.CallToolResult:
        labels[task.task_id] = label
        with anyio.move_on_after(HOLD_LIMIT_S):
            while True:
                current = await support.store.get_task(task.task_id)
                if current is None or current.status == "cancelled":
                    noticed.append(label)
                    # run_task() completes what the work returns unless the work's own copy of its task
                    # reads terminal, and only the work's updates refresh that copy: without this one,
                    # complete() and then fail() raise on the cancelled task, and the error ends the
                    # server session whose task group the work runs in (mcp 1.30.0).
                    if current is not None:
                        await task.update_status("cancelled", notify=False)
                    break
                await anyio.sleep(0.05)
        return _text(f"held {label}")

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult | types.CreateTaskResult:
        ctx = server.request_context
        experimental = ctx.experimental
        tool = next((tool for tool in TOOLS if tool.name == name), None)
        if tool is None:
            return types.CallToolResult(content=[types.TextContent(type="text", text="unknown tool")], isError=True)
        experimental.validate_for_tool(tool)
        if name == "cancels_seen":
            return _text(json.dumps({"cancelled": cancelled, "noticed": noticed}))
        if name == "quick_sum":
            total = int(arguments["a"]) + int(arguments["b"])
            if not experimental.is_task:
                return _text(f"sum {total}")

            async def summed(task: ServerTaskContext) -> types.CallToolResult:
                return _text(f"sum {total} (task)")

            return await experimental.run_task(summed)
        if name == "slow_report":
            topic = str(arguments["topic"])
            return await experimental.run_task(lambda task: slow_report(task, topic))
        if name == "ask_name":
            return await experimental.run_task(ask_name)
        if name == "crash":
            return await experimental.run_task(crash)
        label = str(arguments["label"])
        return await experimental.run_task(lambda task: hold(task, label))

    return server


def build_app(server: Server[Any, Any]) -> Starlette:
    manager = StreamableHTTPSessionManager(app=server)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    uvicorn.run(build_app(build_server()), host="127.0.0.1", port=args.port, log_level=args.log_level.lower())


if __name__ == "__main__":
    main()
