"""The native tasks server: ``fastmcp[tasks]==4.1.4`` with ``fastmcp-tasks==4.1.4`` (``.venv-tasks``).

The one server that serves the ``io.modelcontextprotocol/tasks`` extension natively. It offers the task tools
of the legacy fixture server (``tests/peers/conformance_fixture.py``, ``add_task_tools`` and ``add_task_probes``)
under the same names, with the same arguments, questions and answers, written the way this stack writes
them: ``@mcp.tool(task=...)`` (the server runs the call as a task when the request declares the extension),
questions by the guard pattern (the tool *returns* an ``InputRequiredResult``; the task parks in
``input_required``; ``tasks/update`` re-runs it with ``ctx.input_responses``), progress through
``ctx.report_progress`` (the task's ``statusMessage``), a tool error by raising ``ToolError`` (a
``completed`` task with ``isError: true``), a JSON-RPC error by raising ``MCPError`` (a ``failed`` task).
``tests/interop/test_tasks_native_differential.py`` drives it and the gateway in front of the legacy
fixture with the same requests and compares the answers.

Run it with the tasks interpreter::

    .venv-tasks/bin/python tests/peers/native_tasks_server.py --port N [--poll-interval-ms MS]

Streamable HTTP on ``http://127.0.0.1:N/mcp``; the task backend is Docket's in-memory one (no Redis).

The same file is the native *client* too: ``--drive URL`` drives the task tools at ``URL`` (this server,
or the gateway in front of the legacy fixture) with ``fastmcp_tasks.call_tool_task`` and the transparent
``Client.call_tool``, and prints what it saw as one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import timedelta
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel


class _ConfirmDelete(BaseModel):
    confirm: bool


class _NameConfirm(BaseModel):
    # The legacy fixture's model, field for field: the requested schema is the same JSON.
    name: str = ""
    confirm: bool = False


def _ask(message: str, model: type[BaseModel]) -> mcp_types.ElicitRequest:
    """An ``elicitation/create`` form question, its schema the model's (as the legacy fixture's ``ctx.elicit``)."""
    schema = model.model_json_schema()
    params = mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema)  # type: ignore[arg-type]
    return mcp_types.ElicitRequest(method="elicitation/create", params=params)


def _accepted(answer: Any) -> dict[str, Any] | None:
    """The accepted form's content, or None (declined, cancelled, or no answer)."""
    if answer is None:
        return None
    dumped = answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer
    if not isinstance(dumped, dict) or dumped.get("action") != "accept":
        return None
    content = dumped.get("content")
    return content if isinstance(content, dict) else {}


def build_server(poll_interval_ms: int) -> FastMCP:
    mcp = FastMCP("mrtr-native-tasks")
    mcp.add_extension(TasksExtension())
    task = TaskConfig(mode="optional", poll_interval=timedelta(milliseconds=poll_interval_ms))

    @mcp.tool(task=task, description="Sync-only: returns Hello, {name}!")
    async def greet(name: str) -> str:
        return f"Hello, {name}!"

    @mcp.tool(task=task, description="Sleeps `seconds` (silent: no progress, no log), then returns; cancellable")
    async def slow_compute(seconds: float, label: str = "") -> str:
        await asyncio.sleep(seconds)
        return f"slow_compute {label or 'unlabelled'} finished after {seconds:g}s"

    @mcp.tool(task=task, description="Returns a tool execution error (isError: true) after about 1 s")
    async def failing_job() -> str:
        await asyncio.sleep(1.0)
        # The legacy fixture raises RuntimeError("failing_job: ..."), which mcp 1.30.0 FastMCP reports with
        # this prefix: the same text here keeps the two results comparable byte for byte.
        raise ToolError("Error executing tool failing_job: failing_job: the job failed (tool execution error)")

    @mcp.tool(task=task, description="Ends in a JSON-RPC error (-32603), not in a tool execution error")
    async def protocol_error_job() -> str:
        await asyncio.sleep(0.5)
        raise MCPError(code=mcp_types.INTERNAL_ERROR, message="protocol_error_job: simulated internal failure")

    @mcp.tool(task=task, description="Asks one confirmation (elicitation), then deletes nothing")
    async def confirm_delete(filename: str, ctx: Context) -> str:
        answers = ctx.input_responses
        if not answers or "confirm" not in answers:
            return mcp_types.InputRequiredResult(  # type: ignore[return-value]
                input_requests={"confirm": _ask(f"Delete {filename}?", _ConfirmDelete)}
            )
        content = _accepted(answers["confirm"])
        return f"deleted {filename}" if content and content.get("confirm") else f"kept {filename}"

    @mcp.tool(task=task, description="Asks two questions at once (two concurrent elicitations)")
    async def multi_input(ctx: Context) -> str:
        answers = ctx.input_responses
        if not answers or not {"first", "second"} <= set(answers):
            return mcp_types.InputRequiredResult(  # type: ignore[return-value]
                input_requests={
                    "first": _ask("First input?", _NameConfirm),
                    "second": _ask("Second input?", _NameConfirm),
                }
            )
        contents = [_accepted(answers[key]) for key in ("first", "second")]
        names = [str(content.get("name", "")) for content in contents if content is not None]
        return f"multi_input got {len(names)} answer(s): {', '.join(names)}"

    @mcp.tool(task=task, description="Reports progress 1/2 ('halfway'), stays silent `seconds`, then finishes")
    async def staged_job(seconds: float, ctx: Context) -> str:
        await ctx.report_progress(1, 2, "halfway")
        await asyncio.sleep(seconds)
        await ctx.report_progress(2, 2, "finishing")
        return f"staged_job finished after {seconds:g}s"

    return mcp


async def _answer(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
    """The driver's elicitation handler: confirms, and names each of ``multi_input``'s questions."""
    return {"confirm": True} if message.startswith("Delete ") else {"name": message.split(maxsplit=1)[0].lower()}


def _text(result: Any) -> str:
    return " ".join(block.text for block in result.content if getattr(block, "type", None) == "text")


async def drive(url: str) -> dict[str, Any]:
    """What the native client (``fastmcp_tasks.call_tool_task`` and the transparent ``Client.call_tool``) sees
    of the task tools at ``url``, as JSON: the same steps whichever server is there."""
    from fastmcp import Client
    from fastmcp_tasks import call_tool_task

    seen: dict[str, Any] = {}
    async with Client(url, elicitation_handler=_answer) as client:
        task = await call_tool_task(client, "slow_compute", {"seconds": 0.5, "label": "driven"})
        created = task.create_result
        seen["created"] = [created.status, created.ttl_ms, created.poll_interval_ms, created.task_id != ""]
        seen["slow_compute"] = _text(await task.result())
        seen["slow_compute status"] = (await task.status()).status
        asking = await call_tool_task(client, "confirm_delete", {"filename": "driven.txt"})
        parked = await asking.wait(state="input_required", timeout=15)
        seen["confirm_delete asks"] = [request["params"]["message"] for request in parked.input_requests.values()]
        seen["confirm_delete"] = _text(await asking.result())
        failing = await call_tool_task(client, "failing_job", {}, raise_on_error=False)
        failed_result = await failing.result()
        seen["failing_job"] = [failed_result.is_error, _text(failed_result)]
        broken = await call_tool_task(client, "protocol_error_job", {}, raise_on_error=False)
        broken_result = await broken.result()
        broken_final = await broken.status()
        seen["protocol_error_job"] = [broken_result.is_error, _text(broken_result), broken_final.status]
        seen["protocol_error_job error"] = broken_final.error
        long = await call_tool_task(client, "slow_compute", {"seconds": 30, "label": "driven cancel"})
        await long.cancel()
        seen["cancelled"] = (await long.wait(timeout=15)).status
        transparent = await client.call_tool("multi_input", {})
        seen["multi_input"] = _text(transparent)
    return seen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, help="serve the task tools on this port")
    parser.add_argument("--poll-interval-ms", type=int, default=250)
    parser.add_argument("--drive", metavar="URL", help="instead: drive the task tools at URL, print JSON")
    args = parser.parse_args(argv)
    if args.drive:
        print(json.dumps(asyncio.run(drive(args.drive)), sort_keys=True))
        return
    if args.port is None:
        parser.error("--port or --drive is required")
    build_server(args.poll_interval_ms).run(
        transport="http", host="127.0.0.1", port=args.port, path="/mcp", show_banner=False, log_level="WARNING"
    )


if __name__ == "__main__":
    main()
