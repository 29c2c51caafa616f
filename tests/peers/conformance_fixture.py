"""The official conformance suite's fixture server, written the legacy way, on ``mcp==1.30.0`` FastMCP.

``@modelcontextprotocol/conformance`` (``tests/node_tools.py``) calls fixture tools, resources and
prompts by name (``test_simple_text``, ``test_input_required_result_*``, ``test://static-text``, ...);
its example server (``examples/servers/typescript/everything-server.ts`` in the suite's repository)
shows what each must do. This server offers the same names as a handshake-era server would:
every question is an inline server-to-client request (``ctx.elicit``,
``ctx.session.create_message``, ``ctx.session.list_roots()``), progress is ``report_progress``,
logs are ``ctx.info``. The gateway in front of it turns them into ``InputRequiredResult`` rounds;
``tests/conformance_suite/test_official_suite.py`` runs the suite against that gateway.

Run it with the legacy interpreter::

    .venv-legacy/bin/python tests/peers/conformance_fixture.py --port N [--log-level LEVEL]

Streamable HTTP on ``http://127.0.0.1:N/mcp``, stateful, SSE responses.

The fixtures come in groups, one function each (``FIXTURE_GROUPS``). The tasks extension's scenarios
(``tasks-*``) call legacy tools that know nothing of tasks (``add_task_tools``): the gateway's route config
(``tests/conformance_suite/suite.py``) decides which of them become tasks. ``add_task_probes`` adds what the
gateway's own task tests (``tests/e2e/test_tasks.py``) need beyond the suite: progress mid-task, the calls a
``notifications/cancelled`` reached, and the calls still running.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import weakref
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.elicitation import AcceptedElicitation
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.prompts.base import Message, UserMessage
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.session import ServerSession
from mcp.shared.exceptions import McpError, UrlElicitationRequiredError
from mcp.shared.session import RequestResponder
from mcp.types import (
    INTERNAL_ERROR,
    AudioContent,
    CallToolRequest,
    ClientCapabilities,
    Completion,
    CompletionArgument,
    CompletionContext,
    ContentBlock,
    ElicitationCapability,
    EmbeddedResource,
    ErrorData,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    SamplingCapability,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import AnyUrl, BaseModel, Field

# The suite's own test data (everything-server.ts): a 1x1 red PNG and a minimal WAV file.
TEST_IMAGE_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
TEST_AUDIO_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


class _Name(BaseModel):
    name: str


class _Color(BaseModel):
    color: str


class _Confirm(BaseModel):
    ok: bool


class _Value(BaseModel):
    value: str


class _Context(BaseModel):
    context: str


class _ConfirmDelete(BaseModel):
    confirm: bool


class _NameConfirm(BaseModel):
    # Defaults: the suite answers multi_input's two questions with {name, confirm}.
    name: str = ""
    confirm: bool = False


def _text(content: object) -> str:
    return content.text if isinstance(content, TextContent) else f"<{type(content).__name__}>"


async def _sample(ctx: Context, prompt: str, max_tokens: int) -> str:
    """One sampling request, related to the call so it rides the call's POST stream."""
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=max_tokens,
        related_request_id=ctx.request_id,
    )
    return _text(result.content)


def _answered(answer: Any) -> Any:
    """The accepted form's data, or None when the user declined or cancelled."""
    return answer.data if isinstance(answer, AcceptedElicitation) else None


def add_content_tools(mcp: FastMCP) -> None:
    """tools-list, tools-call-*: content of every kind, an error, progress, logging."""

    @mcp.tool(description="Tests simple text content response")
    def test_simple_text() -> str:
        return "This is a simple text response for testing."

    @mcp.tool(description="Tests image content response", structured_output=False)
    def test_image_content() -> list[ContentBlock]:
        return [ImageContent(type="image", data=TEST_IMAGE_BASE64, mimeType="image/png")]

    @mcp.tool(description="Tests audio content response", structured_output=False)
    def test_audio_content() -> list[ContentBlock]:
        return [AudioContent(type="audio", data=TEST_AUDIO_BASE64, mimeType="audio/wav")]

    @mcp.tool(description="Tests embedded resource content response", structured_output=False)
    def test_embedded_resource() -> list[ContentBlock]:
        resource = TextResourceContents(
            uri=AnyUrl("test://embedded-resource"),
            mimeType="text/plain",
            text="This is an embedded resource content.",
        )
        return [EmbeddedResource(type="resource", resource=resource)]

    @mcp.tool(description="Tests response with multiple content types (text, image, resource)", structured_output=False)
    def test_multiple_content_types() -> list[ContentBlock]:
        resource = TextResourceContents(
            uri=AnyUrl("test://mixed-content-resource"),
            mimeType="application/json",
            text=json.dumps({"test": "data", "value": 123}),
        )
        return [
            TextContent(type="text", text="Multiple content types test:"),
            ImageContent(type="image", data=TEST_IMAGE_BASE64, mimeType="image/png"),
            EmbeddedResource(type="resource", resource=resource),
        ]

    @mcp.tool(description="Tests tool that emits log messages during execution")
    async def test_tool_with_logging(ctx: Context) -> str:
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.info(step)
            await asyncio.sleep(0.05)
        return "Tool with logging executed successfully"

    @mcp.tool(description="Tests tool that reports progress notifications")
    async def test_tool_with_progress(ctx: Context) -> str:
        for progress in (0, 50, 100):
            await ctx.report_progress(progress, 100, f"Completed step {progress} of 100")
            await asyncio.sleep(0.05)
        meta = ctx.request_context.meta
        return str(meta.progressToken if meta is not None else 0)

    @mcp.tool(description="Tests error response handling")
    def test_error_handling() -> str:
        raise RuntimeError("This tool intentionally returns an error for testing")

    @mcp.tool(description="Tests server-initiated sampling (LLM completion request)")
    async def test_sampling(prompt: str, ctx: Context) -> str:
        return f"LLM response: {await _sample(ctx, prompt, 100)}"

    @mcp.tool(description="Tests server-initiated elicitation (user input request)")
    async def test_elicitation(message: str, ctx: Context) -> str:
        answer = await ctx.elicit(message, _Value)
        return f"User response: action={answer.action}"


def add_input_required_tools(mcp: FastMCP) -> None:
    """input-required-result-*: what a 2026-07-28 server returns as InputRequiredResult rounds, asked inline."""

    @mcp.tool(description="MRTR: one elicitation")
    async def test_input_required_result_elicitation(ctx: Context) -> str:
        name = _answered(await ctx.elicit("What is your name?", _Name))
        return f"Hello, {name.name if name else 'unknown'}!"

    @mcp.tool(description="MRTR: one sampling request")
    async def test_input_required_result_sampling(ctx: Context) -> str:
        return f"Sampling result: {await _sample(ctx, 'What is the capital of France?', 100)}"

    @mcp.tool(description="MRTR: one roots/list request")
    async def test_input_required_result_list_roots(ctx: Context) -> str:
        roots = await ctx.session.list_roots()
        return f"Found {len(roots.roots)} root(s)"

    @mcp.tool(description="MRTR: one elicitation; the gateway carries the held call in requestState")
    async def test_input_required_result_request_state(ctx: Context) -> str:
        confirm = _answered(await ctx.elicit("Please confirm", _Confirm))
        return "state-ok: requestState validated" if confirm and confirm.ok else "state-not-confirmed"

    @mcp.tool(description="MRTR: an elicitation, a sampling request and roots/list in one round")
    async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
        name, greeting, roots = await asyncio.gather(
            ctx.elicit("What is your name?", _Name),
            _sample(ctx, "Generate a greeting", 50),
            ctx.session.list_roots(),
        )
        user = _answered(name)
        return f"Name: {user.name if user else 'unknown'}; Greeting: {greeting}; Roots: {len(roots.roots)}"

    @mcp.tool(description="MRTR: two dependent elicitations, two rounds")
    async def test_input_required_result_multi_round(ctx: Context) -> str:
        name = _answered(await ctx.elicit("Step 1: What is your name?", _Name))
        color = _answered(await ctx.elicit("Step 2: What is your favorite color?", _Color))
        return f"Multi-round complete for {name.name if name else 'friend'} who likes {color.color if color else '?'}"

    @mcp.tool(description="MRTR: one elicitation; a tampered requestState must be refused")
    async def test_input_required_result_tampered_state(ctx: Context) -> str:
        confirm = _answered(await ctx.elicit("Please confirm", _Confirm))
        return "integrity-ok: state verified" if confirm else "integrity-not-confirmed"

    @mcp.tool(description="MRTR: asks only what the client's capabilities allow")
    async def test_input_required_result_capabilities(ctx: Context) -> str:
        asks: list[Any] = []
        if ctx.session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability())):
            asks.append(ctx.elicit("Elicitation input", _Value))
        if ctx.session.check_client_capability(ClientCapabilities(sampling=SamplingCapability())):
            asks.append(_sample(ctx, "Sample request", 50))
        answers = await asyncio.gather(*asks)
        return f"Received {len(answers)} input response(s)"

    @mcp.prompt(description="MRTR: prompt that requires elicitation input")
    async def test_input_required_result_prompt(ctx: Context) -> str:
        context = _answered(await ctx.elicit("What context should the prompt use?", _Context))
        return f"Prompt with context: {context.context if context else 'unknown'}"


def add_resources_and_prompts(mcp: FastMCP) -> None:
    """resources-*, prompts-*, completion-complete."""

    @mcp.resource(
        "test://static-text",
        name="static-text",
        description="A static text resource for testing",
        mime_type="text/plain",
    )
    def static_text() -> str:
        return "This is the content of the static text resource."

    @mcp.resource(
        "test://static-binary",
        name="static-binary",
        description="A static binary resource (image) for testing",
        mime_type="image/png",
    )
    def static_binary() -> bytes:
        import base64

        return base64.b64decode(TEST_IMAGE_BASE64)

    @mcp.resource(
        "test://template/{id}/data",
        name="template",
        description="A resource template with parameter substitution",
        mime_type="application/json",
    )
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @mcp.resource(
        "test://watched-resource",
        name="watched-resource",
        description="A resource that can be subscribed to",
        mime_type="text/plain",
    )
    def watched_resource() -> str:
        return "Watched resource content"

    @mcp.prompt(description="A simple prompt without arguments")
    def test_simple_prompt() -> str:
        return "This is a simple prompt for testing."

    @mcp.prompt(description="A prompt with required arguments")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @mcp.prompt(description="A prompt that includes an embedded resource")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
        resource = TextResourceContents(
            uri=AnyUrl(resourceUri), mimeType="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(content=EmbeddedResource(type="resource", resource=resource)),
            UserMessage(content="Please process the embedded resource above."),
        ]

    @mcp.prompt(description="A prompt that includes image content")
    def test_prompt_with_image() -> list[Message]:
        return [
            UserMessage(content=ImageContent(type="image", data=TEST_IMAGE_BASE64, mimeType="image/png")),
            UserMessage(content="Please analyze the image above."),
        ]

    @mcp.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        return Completion(values=[], total=0, hasMore=False)


def add_stateless_diagnostics(mcp: FastMCP) -> None:
    """server-stateless: a tool needing an undeclared capability, a streaming elicitation, a log, list changes."""
    server = mcp._mcp_server
    sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
    original_init = ServerSession.__init__

    def tracking_init(self: ServerSession, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        sessions.add(self)

    ServerSession.__init__ = tracking_init  # type: ignore[method-assign]
    original_options = server.create_initialization_options

    def options(notification_options: NotificationOptions | None = None, experimental: Any = None) -> Any:
        changes = NotificationOptions(tools_changed=True, prompts_changed=True, resources_changed=True)
        return original_options(changes, experimental or {})

    server.create_initialization_options = options  # type: ignore[method-assign]

    @mcp.tool(description="Needs sampling: a client that did not declare it must hear -32021")
    async def test_missing_capability(ctx: Context) -> str:
        await _sample(ctx, "Say anything", 10)
        return "Success"

    @mcp.tool(description="Elicits on the call's stream; the gateway answers with an InputRequiredResult")
    async def test_streaming_elicitation(ctx: Context) -> str:
        value = _answered(await ctx.elicit("Streaming elicitation", _Value))
        return f"value={value.value if value else 'none'}"

    @mcp.tool(description="Logs one message; a client that sets no log level must not see it")
    async def test_logging_tool(ctx: Context) -> str:
        await ctx.info("test_logging_tool ran")
        return "logged"

    counter = iter(range(1, 1_000_000))

    @mcp.tool(description="Adds a tool and tells every session the tool list changed")
    async def test_trigger_tool_change() -> str:
        name = f"dynamic_tool_{next(counter)}"
        mcp.add_tool(lambda: name, name=name, description="added at run time")
        for session in list(sessions):
            with contextlib.suppress(Exception):
                await session.send_tool_list_changed()
        return f"added={name}"

    @mcp.tool(description="Adds a prompt and tells every session the prompt list changed")
    async def test_trigger_prompt_change() -> str:
        name = f"dynamic_prompt_{next(counter)}"
        mcp.add_prompt(_dynamic_prompt(name))
        for session in list(sessions):
            with contextlib.suppress(Exception):
                await session.send_prompt_list_changed()
        return f"added={name}"


JSON_SCHEMA_2020_12_INPUT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
"""The suite's raw JSON Schema 2020-12 tool schema (everything-server.ts), listed byte for byte."""


def add_schema_and_header_tools(mcp: FastMCP) -> None:
    """json-schema-2020-12, http-custom-header-server-validation (pending in the suite, run and checked here)."""

    @mcp.tool(description="Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)")
    def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None) -> str:
        return f"JSON Schema 2020-12 tool called with: {json.dumps({'name': name, 'address': address})}"

    # FastMCP derives inputSchema from the signature; the suite wants its raw schema preserved.
    mcp._tool_manager._tools["json_schema_2020_12_tool"].parameters = JSON_SCHEMA_2020_12_INPUT_SCHEMA

    @mcp.tool(description="Parameters mirrored into Mcp-Param-* headers (x-mcp-header)")
    def test_custom_headers(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
        query: str = "",
    ) -> str:
        return f"region={region};query={query}"


class _JsonRpcError(UrlElicitationRequiredError):
    """A JSON-RPC error out of a FastMCP tool. FastMCP (``tools/base.py``) and the low-level server
    (``lowlevel/server.py``) turn every exception a tool raises into an ``isError`` result, except this one
    family, which ``_handle_request`` answers with its ``error``: the only way a legacy FastMCP tool ends
    its call in a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        McpError.__init__(self, ErrorData(code=code, message=message))
        self._elicitations = []


def add_task_tools(mcp: FastMCP) -> None:
    """tasks-*: the tools the suite's tasks scenarios call, written as a legacy server writes any tool
    (no task support of their own: the gateway makes the tasks)."""

    @mcp.tool(description="Sync-only: returns Hello, {name}!")
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    @mcp.tool(description="Sleeps `seconds` (silent: no progress, no log), then returns; cancellable")
    async def slow_compute(seconds: float, label: str = "") -> str:
        await asyncio.sleep(seconds)  # the silence is the point: a long tool that reports nothing
        return f"slow_compute {label or 'unlabelled'} finished after {seconds:g}s"

    @mcp.tool(description="Returns a tool execution error (isError: true) after about 1 s")
    async def failing_job() -> str:
        await asyncio.sleep(1.0)
        raise RuntimeError("failing_job: the job failed (tool execution error)")

    @mcp.tool(description="Ends in a JSON-RPC error (-32603), not in a tool execution error")
    async def protocol_error_job() -> str:
        await asyncio.sleep(0.5)
        raise _JsonRpcError(INTERNAL_ERROR, "protocol_error_job: simulated internal failure")

    @mcp.tool(description="Asks one confirmation (elicitation), then deletes nothing")
    async def confirm_delete(filename: str, ctx: Context) -> str:
        answer = _answered(await ctx.elicit(f"Delete {filename}?", _ConfirmDelete))
        return f"deleted {filename}" if answer and answer.confirm else f"kept {filename}"

    @mcp.tool(description="Asks two questions at once (two concurrent elicitations)")
    async def multi_input(ctx: Context) -> str:
        first, second = await asyncio.gather(
            ctx.elicit("First input?", _NameConfirm),
            ctx.elicit("Second input?", _NameConfirm),
        )
        names = [answer.name for answer in (_answered(first), _answered(second)) if answer is not None]
        return f"multi_input got {len(names)} answer(s): {', '.join(names)}"

    @mcp.tool(description="Asks the user's name (an MRTR round), then works 2 s (a task past the threshold)")
    async def test_tool_with_task(ctx: Context) -> str:
        name = _answered(await ctx.elicit("What is your name?", _Name))
        await asyncio.sleep(2.0)  # the work that outlasts the route's task threshold
        return f"Hello, {name.name if name else 'unknown'}!"


def _tool_call(responder: RequestResponder[Any, Any]) -> dict[str, Any] | None:
    request = getattr(responder.request, "root", None)
    if not isinstance(request, CallToolRequest):
        return None
    return {"tool": request.params.name, "arguments": request.params.arguments or {}}


def add_task_probes(mcp: FastMCP) -> None:
    """What the gateway's task tests check beyond the suite: progress during a task (``staged_job``),
    which calls a ``notifications/cancelled`` reached (``cancelled_calls``), and which calls are still
    running (``calls_in_flight``), each as ``{"tool", "arguments"}``.

    mcp 1.x cancels a call on ``notifications/cancelled`` through ``RequestResponder.cancel`` and through
    nothing else (a closed session cancels its task group instead), so wrapping it records exactly the
    calls the client (here: the gateway) cancelled. The low-level server handles every request inside
    ``with responder:``, so the responders inside that block are the requests in flight."""
    cancelled: list[dict[str, Any]] = []
    in_flight: set[RequestResponder[Any, Any]] = set()
    original_cancel = RequestResponder.cancel
    original_enter = RequestResponder.__enter__
    original_exit = RequestResponder.__exit__

    async def recording_cancel(self: RequestResponder[Any, Any]) -> None:
        call = _tool_call(self)
        if call is not None:
            cancelled.append(call)
        await original_cancel(self)

    def tracking_enter(self: RequestResponder[Any, Any]) -> RequestResponder[Any, Any]:
        in_flight.add(self)
        return original_enter(self)

    def tracking_exit(self: RequestResponder[Any, Any], *exc_info: Any) -> None:
        in_flight.discard(self)
        original_exit(self, *exc_info)

    RequestResponder.cancel = recording_cancel  # type: ignore[method-assign]
    RequestResponder.__enter__ = tracking_enter  # type: ignore[method-assign]
    RequestResponder.__exit__ = tracking_exit  # type: ignore[method-assign]

    @mcp.tool(description="The tools/call requests a notifications/cancelled reached, as a JSON list")
    def cancelled_calls() -> str:
        return json.dumps(cancelled)

    @mcp.tool(description="The tools/call requests running now (this one excepted), as a JSON list")
    def calls_in_flight() -> str:
        calls = [call for call in map(_tool_call, list(in_flight)) if call is not None]
        return json.dumps([call for call in calls if call["tool"] != "calls_in_flight"])

    @mcp.tool(description="Reports progress 1/2 ('halfway'), stays silent `seconds`, then finishes")
    async def staged_job(seconds: float, ctx: Context) -> str:
        await ctx.report_progress(1, 2, "halfway")
        await asyncio.sleep(seconds)  # a task's statusMessage shows the last progress meanwhile
        await ctx.report_progress(2, 2, "finishing")
        return f"staged_job finished after {seconds:g}s"


def _dynamic_prompt(name: str) -> Any:
    from mcp.server.fastmcp.prompts.base import Prompt

    return Prompt.from_function(lambda: f"I am {name}", name=name, description="added at run time")


FIXTURE_GROUPS: tuple[Callable[[FastMCP], None], ...] = (
    add_content_tools,
    add_input_required_tools,
    add_resources_and_prompts,
    add_stateless_diagnostics,
    add_schema_and_header_tools,
    add_task_tools,
    add_task_probes,
)
"""Every group of fixtures this server offers; a new group of scenarios adds its function here."""


def build_server(*, log_level: str) -> FastMCP:
    mcp = FastMCP("mrtr-conformance-fixture", host="127.0.0.1", log_level=log_level)  # type: ignore[arg-type]
    for add_group in FIXTURE_GROUPS:
        add_group(mcp)
    return mcp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    args = parser.parse_args(argv)
    mcp = build_server(log_level=args.log_level)
    mcp.settings.port = args.port
    mcp.run(transport="streamable-http")


if __name__ == "__main__":
    main()
