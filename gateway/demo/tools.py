"""What the demo backend offers: its tools, one prompt, two resources and a completion.

The names and result texts here are a contract. The ``mrtr-gateway demo`` walkthrough and
the gateway's tests (whose fake, ``tests/fake_backend.py``, offers these tools and a few of
its own) call these tools through the gateway and assert on the text they return, so every
tool answers with one short, predictable line (``"city=Paris"``, ``"name=Ada;color=blue"``).

Nothing in this module knows about HTTP or sessions. A tool reaches its client only
through a :class:`ToolContext`, which the transport in :mod:`gateway.demo.backend`
implements: it decides which stream a server→client request travels on, refuses to send
one the session's client did not declare a capability for, and bounds every wait for an
answer. Tools report those refusals, and any bad argument, as a tool error result
(:class:`ToolFailure`); protocol-level failures that a real server answers with a JSON-RPC
error (unknown tool, unknown resource, URL elicitation required) are :class:`RpcError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_types.jsonrpc import INVALID_PARAMS

JsonObject = dict[str, Any]

RESOURCE_NOT_FOUND = -32002
"""Legacy servers answer an unknown resource URI with this code (2026-07-28 uses -32602)."""

URL_ELICITATION_PROTOCOL_VERSION = "2025-11-25"


class RpcError(Exception):
    """A failure the server answers with a JSON-RPC error object instead of a result."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> JsonObject:
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ToolFailure(Exception):
    """A tool could not do its job; the call still succeeds with ``isError: true``."""


class ToolContext(Protocol):
    """The slice of one ``tools/call`` a tool may touch."""

    @property
    def protocol_version(self) -> str:
        """The protocol revision negotiated for the session."""
        ...

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header of the HTTP request that carried the call."""
        ...

    @property
    def progress_token(self) -> str | int | None:
        """``params._meta.progressToken`` of the call, if the client sent one."""
        ...

    @property
    def session_flags(self) -> set[str]:
        """Per-session memory for tools that behave differently on a second call."""
        ...

    def notify(self, method: str, params: JsonObject) -> None:
        """Send a notification related to this call."""
        ...

    def log(self, level: str, data: Any) -> None:
        """Send a ``notifications/message`` if the session's log level lets it through."""
        ...

    async def request_all(
        self, requests: Sequence[tuple[str, JsonObject | None]], *, standalone: bool = False
    ) -> list[JsonObject]:
        """Send every server→client request before awaiting any answer; return the results.

        Raises :class:`ToolFailure` when a request cannot be sent, the client answers with a
        JSON-RPC error, or no answer arrives in time.
        """
        ...


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    input_schema: JsonObject
    run: Callable[[ToolContext, JsonObject], Awaitable[str]]

    def to_json(self) -> JsonObject:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}


def _schema(properties: JsonObject | None = None) -> JsonObject:
    props = properties or {}
    return {"type": "object", "properties": props, "required": sorted(props)}


def _number(arguments: JsonObject, name: str) -> float | int:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolFailure(f"invalid arguments: {name!r} must be a number")
    return value


def _string(arguments: JsonObject, name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str):
        raise ToolFailure(f"invalid arguments: {name!r} must be a string")
    return value


def _form(ctx: ToolContext, message: str, field: str) -> tuple[str, JsonObject]:
    params: JsonObject = {
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {field: {"type": "string"}},
            "required": [field],
        },
    }
    # "mode" only exists since 2025-11-25; 2025-06-18 elicitation is form-only and has no field for it.
    if ctx.protocol_version >= URL_ELICITATION_PROTOCOL_VERSION:
        params = {"mode": "form", **params}
    return "elicitation/create", params


def _accepted(answer: JsonObject, field: str) -> str | None:
    """The answered field of an accepted elicitation, or None when the user did not accept."""
    if answer.get("action") != "accept":
        return None
    content = answer.get("content")
    value = content.get(field) if isinstance(content, dict) else None
    if not isinstance(value, str):
        raise ToolFailure(f"elicitation answer has no string {field!r}")
    return value


def _declined(answer: JsonObject) -> str:
    return f"action={answer.get('action')}"


def _sampling(text: str) -> tuple[str, JsonObject]:
    return "sampling/createMessage", {
        "messages": [{"role": "user", "content": {"type": "text", "text": f"Summarize: {text}"}}],
        "maxTokens": 100,
    }


def _sampled_text(answer: JsonObject) -> str:
    content = answer.get("content")
    # 2025-11-25 allows a list of content blocks; earlier revisions send exactly one.
    blocks = content if isinstance(content, list) else [content]
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            return str(block["text"])
    raise ToolFailure("sampling answer has no text content")


async def _add(ctx: ToolContext, arguments: JsonObject) -> str:
    return str(_number(arguments, "a") + _number(arguments, "b"))


async def _echo(ctx: ToolContext, arguments: JsonObject) -> str:
    return _string(arguments, "text")


async def _ask_city(ctx: ToolContext, arguments: JsonObject) -> str:
    (answer,) = await ctx.request_all([_form(ctx, "Which city?", "city")])
    city = _accepted(answer, "city")
    return _declined(answer) if city is None else f"city={city}"


async def _ask_two(ctx: ToolContext, arguments: JsonObject) -> str:
    (first,) = await ctx.request_all([_form(ctx, "What is your name?", "name")])
    name = _accepted(first, "name")
    if name is None:
        return _declined(first)
    (second,) = await ctx.request_all([_form(ctx, f"Hello {name}, what is your favourite color?", "color")])
    color = _accepted(second, "color")
    return _declined(second) if color is None else f"name={name};color={color}"


async def _summarize(ctx: ToolContext, arguments: JsonObject) -> str:
    (answer,) = await ctx.request_all([_sampling(_string(arguments, "text"))])
    return f"sampled={_sampled_text(answer)}"


async def _show_roots(ctx: ToolContext, arguments: JsonObject) -> str:
    # Like the mcp 1.x SDK, list_roots() is not tied to the call, so it travels on the GET stream.
    (answer,) = await ctx.request_all([("roots/list", None)], standalone=True)
    roots = answer.get("roots")
    if not isinstance(roots, list):
        raise ToolFailure("roots/list answer has no roots")
    return "roots=" + ",".join(str(root.get("uri")) for root in roots if isinstance(root, dict))


SLOW_REPORT_STEPS = 5
SLOW_REPORT_STEP_SECONDS = 1.0


async def _slow_report(ctx: ToolContext, arguments: JsonObject) -> str:
    """About five seconds of work, one ``notifications/progress`` a second: the demo's task."""
    for step in range(1, SLOW_REPORT_STEPS + 1):
        await asyncio.sleep(SLOW_REPORT_STEP_SECONDS)  # the tool's behaviour: one step of slow work
        if ctx.progress_token is not None:
            message = f"step {step} of {SLOW_REPORT_STEPS}"
            progress = {"progressToken": ctx.progress_token, "progress": step, "total": SLOW_REPORT_STEPS}
            ctx.notify("notifications/progress", {**progress, "message": message})
    return f"report=ready;steps={SLOW_REPORT_STEPS}"


async def _ask_and_sample(ctx: ToolContext, arguments: JsonObject) -> str:
    elicited, sampled = await ctx.request_all([_form(ctx, "Which city?", "city"), _sampling("the city")])
    city = _accepted(elicited, "city")
    first = _declined(elicited) if city is None else f"city={city}"
    return f"{first};sampled={_sampled_text(sampled)}"


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "add",
            "Add two numbers.",
            _schema({"a": {"type": "number"}, "b": {"type": "number"}}),
            _add,
        ),
        Tool("echo", "Return the text unchanged.", _schema({"text": {"type": "string"}}), _echo),
        Tool("ask_city", "Ask the user for a city (one form elicitation).", _schema(), _ask_city),
        Tool("ask_two", "Ask for a name, then a color (two dependent elicitations).", _schema(), _ask_two),
        Tool("summarize", "Summarize text via sampling.", _schema({"text": {"type": "string"}}), _summarize),
        Tool("show_roots", "List the client's roots (asked on the GET stream).", _schema(), _show_roots),
        Tool("ask_and_sample", "Elicit and sample at once, before either answer.", _schema(), _ask_and_sample),
        Tool(
            "slow_report",
            "Work for about five seconds, reporting progress each second (the demo route serves it as a task).",
            _schema(),
            _slow_report,
        ),
    )
}


def _text_result(text: str, *, is_error: bool) -> JsonObject:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


async def call_tool(ctx: ToolContext, params: JsonObject, table: Mapping[str, Tool] = TOOLS) -> JsonObject:
    """Run ``tools/call`` on a tool of ``table``; unknown tools are a JSON-RPC error, tool failures an error result."""
    name = params.get("name")
    tool = table.get(name) if isinstance(name, str) else None
    if tool is None:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
    arguments = params.get("arguments") or {}
    if not isinstance(arguments, dict):
        return _text_result("invalid arguments: expected an object", is_error=True)
    try:
        return _text_result(await tool.run(ctx, arguments), is_error=False)
    except ToolFailure as exc:
        return _text_result(str(exc), is_error=True)


def list_tools() -> JsonObject:
    """``tools/list``: every tool, in one page."""
    return {"tools": [tool.to_json() for tool in TOOLS.values()]}


def list_prompts() -> JsonObject:
    return {
        "prompts": [
            {
                "name": "greet",
                "description": "Greet someone by name.",
                "arguments": [{"name": "name", "description": "Who to greet", "required": True}],
            }
        ]
    }


def get_prompt(params: JsonObject) -> JsonObject:
    if params.get("name") != "greet":
        raise RpcError(INVALID_PARAMS, f"Unknown prompt: {params.get('name')}")
    arguments = params.get("arguments") or {}
    name = arguments.get("name") if isinstance(arguments, dict) else None
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, "Missing required argument: name")
    return {
        "description": "Greet someone by name.",
        "messages": [{"role": "user", "content": {"type": "text", "text": f"Please greet {name}."}}],
    }


README_URI = "demo://readme"
ITEM_PREFIX = "demo://item/"
README_TEXT = "# mrtr demo backend\n\nA small legacy MCP server used to demonstrate mrtr-gateway.\n"


def list_resources() -> JsonObject:
    return {"resources": [{"uri": README_URI, "name": "readme", "mimeType": "text/markdown"}]}


def list_resource_templates() -> JsonObject:
    return {
        "resourceTemplates": [
            {"uriTemplate": ITEM_PREFIX + "{id}", "name": "item", "mimeType": "text/plain"},
        ]
    }


def read_resource(params: JsonObject) -> JsonObject:
    uri = params.get("uri")
    if uri == README_URI:
        return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": README_TEXT}]}
    if isinstance(uri, str) and uri.startswith(ITEM_PREFIX) and len(uri) > len(ITEM_PREFIX):
        item = uri.removeprefix(ITEM_PREFIX)
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": f"item {item}"}]}
    raise RpcError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})


COMPLETION_VALUES = ("alpha", "beta", "gamma")


def complete(params: JsonObject) -> JsonObject:
    """``completion/complete``: the same short list whatever is being completed."""
    values = list(COMPLETION_VALUES)
    return {"completion": {"values": values, "total": len(values), "hasMore": False}}
