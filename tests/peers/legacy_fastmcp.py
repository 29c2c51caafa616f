"""A handshake-era MCP server on ``mcp==1.30.0`` FastMCP: the legacy peer the gateway fronts.

Run it with the legacy interpreter (it cannot import next to ``mcp==2.3.0``)::

    .venv-legacy/bin/python tests/peers/legacy_fastmcp.py --port N \
        [--transport streamable-http|sse] [--json-response] [--stateless] [--log-level LEVEL]
    .venv-legacy/bin/python tests/peers/legacy_fastmcp.py --transport stdio [--log-level LEVEL]

It binds 127.0.0.1 and prints nothing the caller needs; fixtures poll the port. Streamable HTTP
serves ``/mcp``; ``--transport sse`` serves the 2024-11-05 transport at ``/sse`` (+ ``/messages/``).
``--transport stdio`` serves one session on stdin/stdout (logs go to stderr) and needs no port;
every server request then travels on stdout, and ``whoami`` answers "unknown".

The tool names and their result strings are a contract shared with ``native_mcpserver.py`` so
one client flow can be asserted against both peers. Every server-to-client request here is the
inline legacy kind, and where it travels is the point of the exercise:

* ``elicitation/create`` and ``sampling/createMessage`` carry ``related_request_id`` and so ride
  the SSE stream of the ``tools/call`` POST that caused them;
* ``roots/list`` has no related request id in 1.30.0 (``ServerSession.list_roots()`` takes none)
  and therefore arrives on the standalone GET stream;
* with ``--json-response`` related requests are dropped, and with ``--stateless`` there is no
  back-channel at all - these modes exist so tests can show the gateway fails them clearly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import weakref
from typing import Annotated, Any

from contract import (
    CITY_QUESTION,
    CITY_SAMPLING_PROMPT,
    COUNT_HEADER,
    KNOWN_NAMES,
    NAME_QUESTION,
    REGION_HEADER,
    SUMMARY_PROMPT,
    City,
    Color,
    Name,
    color_question,
    regional_text,
)
from mcp.server.elicitation import AcceptedElicitation
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.session import ServerSession
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    TextContent,
)
from pydantic import AnyUrl, Field


def _sampled_text(content: object) -> str:
    if isinstance(content, TextContent):
        return content.text
    return f"<{type(content).__name__}>"


def build_server(*, json_response: bool, stateless: bool, log_level: str) -> FastMCP:
    mcp = FastMCP(
        "mrtr-legacy-peer",
        host="127.0.0.1",
        json_response=json_response,
        stateless_http=stateless,
        log_level=log_level,  # type: ignore[arg-type]
    )

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers; needs no client input."""
        return a + b

    @mcp.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool()
    def regional(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": REGION_HEADER})],
        query: str,
        count: Annotated[int, Field(json_schema_extra={"x-mcp-header": COUNT_HEADER})] = 0,
    ) -> str:
        """Parameters mirrored into Mcp-Param-* headers (x-mcp-header), for the header rules."""
        return regional_text(region, count, query)

    @mcp.tool()
    async def ask_city(ctx: Context) -> str:
        """One form elicitation."""
        answer = await ctx.elicit(CITY_QUESTION, City)
        if isinstance(answer, AcceptedElicitation):
            return f"city={answer.data.city}"
        return f"action={answer.action}"

    @mcp.tool()
    async def ask_two(ctx: Context) -> str:
        """Two dependent elicitations: the second question quotes the first answer."""
        first = await ctx.elicit(NAME_QUESTION, Name)
        if not isinstance(first, AcceptedElicitation):
            return f"action={first.action}"
        second = await ctx.elicit(color_question(first.data.name), Color)
        if not isinstance(second, AcceptedElicitation):
            return f"action={second.action}"
        return f"name={first.data.name};color={second.data.color}"

    @mcp.tool()
    async def summarize(text: str, ctx: Context) -> str:
        """One sampling request, related to this call so it rides the POST stream."""
        result = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=SUMMARY_PROMPT.format(text=text)))],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
        return f"sampled={_sampled_text(result.content)}"

    @mcp.tool()
    async def show_roots(ctx: Context) -> str:
        """One roots/list request; 1.30.0 sends it unrelated, i.e. on the standalone GET stream."""
        result = await ctx.session.list_roots()
        return "roots=" + ",".join(str(root.uri) for root in result.roots)

    @mcp.tool()
    async def ask_and_sample(ctx: Context) -> str:
        """An elicitation and a sampling request outstanding at the same time."""
        city, sampled = await asyncio.gather(
            ctx.elicit(CITY_QUESTION, City),
            ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text=CITY_SAMPLING_PROMPT))],
                max_tokens=100,
                related_request_id=ctx.request_id,
            ),
        )
        if not isinstance(city, AcceptedElicitation):
            return f"action={city.action}"
        return f"city={city.data.city};sampled={_sampled_text(sampled.content)}"

    @mcp.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer; for timeout and cancellation tests."""
        await asyncio.sleep(seconds)
        return "slept"

    @mcp.tool()
    async def count(n: int, ctx: Context) -> str:
        """Report progress n times (only when the caller sent a progressToken) and log each step."""
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i}")
            await ctx.info(f"step {i} of {n}")
        return f"counted={n}"

    @mcp.tool()
    def whoami(ctx: Context) -> str:
        """The Authorization header this server saw: its value, "none" if absent,
        "unknown" if the transport carries no HTTP request."""
        request = ctx.request_context.request
        headers = getattr(request, "headers", None)
        if headers is None:
            return "unknown"
        return headers.get("authorization", "none")

    @mcp.prompt()
    def greet(name: str) -> str:
        """Greet someone by name."""
        return f"Hello, {name}!"

    @mcp.resource("demo://readme", mime_type="text/plain")
    def readme() -> str:
        """A static text resource."""
        return "mrtr demo peer readme"

    @mcp.resource("demo://item/{id}", mime_type="text/plain")
    def item(id: str) -> str:
        """A templated text resource."""
        return f"item {id}"

    @mcp.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        if isinstance(ref, PromptReference) and ref.name == "greet" and argument.name == "name":
            return Completion(values=[n for n in KNOWN_NAMES if n.startswith(argument.value)])
        if isinstance(ref, ResourceTemplateReference) and argument.name == "id":
            return Completion(values=[i for i in ("1", "2", "10") if i.startswith(argument.value)])
        return None

    _add_cancellation_probe(mcp)
    _add_change_notifications(mcp)
    return mcp


def _add_cancellation_probe(mcp: FastMCP) -> None:
    cancelled_tags: list[str] = []

    @mcp.tool()
    async def wait_for_cancel(tag: str, seconds: float = 30) -> str:
        """Sleep; if the call is cancelled (notifications/cancelled), remember ``tag``."""
        try:
            await asyncio.sleep(seconds)
        except BaseException:  # anyio delivers the cancellation as the backend-specific exception
            cancelled_tags.append(tag)
            raise
        return "not cancelled"

    @mcp.tool()
    def cancelled() -> str:
        """Comma-joined tags of the wait_for_cancel calls that were cancelled."""
        return ",".join(cancelled_tags)


def _add_change_notifications(mcp: FastMCP) -> None:
    """Advertise tools.listChanged and resources.subscribe, and really send the notifications.

    FastMCP 1.30.0 advertises neither by default and sends notifications only on the calling
    session, so this peer tracks every live session: ``add_tool`` tells all of them the tool list
    changed, ``touch`` tells the sessions subscribed to a URI that it was updated.
    """
    server = mcp._mcp_server
    sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
    subscribers: dict[str, weakref.WeakSet[ServerSession]] = {}
    original_init = ServerSession.__init__

    def tracking_init(self: ServerSession, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        sessions.add(self)

    ServerSession.__init__ = tracking_init  # type: ignore[method-assign]
    original_options = server.create_initialization_options

    def options(notification_options: NotificationOptions | None = None, experimental: Any = None) -> Any:
        init = original_options(NotificationOptions(tools_changed=True, resources_changed=True), experimental or {})
        if init.capabilities.resources is not None:
            init.capabilities.resources.subscribe = True
        return init

    server.create_initialization_options = options  # type: ignore[method-assign]

    @server.subscribe_resource()
    async def subscribe(uri: Any) -> None:
        subscribers.setdefault(str(uri), weakref.WeakSet()).add(server.request_context.session)

    @server.unsubscribe_resource()
    async def unsubscribe(uri: Any) -> None:
        subscribers.get(str(uri), weakref.WeakSet()).discard(server.request_context.session)

    @mcp.tool()
    async def add_tool(name: str) -> str:
        """Register a new tool ``name`` and send tools/list_changed to every session."""

        def added() -> str:
            return f"I am {name}"

        mcp.add_tool(added, name=name, description="added at run time")
        for session in list(sessions):
            with contextlib.suppress(Exception):
                await session.send_tool_list_changed()
        return f"added={name}"

    @mcp.tool()
    async def touch(uri: str) -> str:
        """Send resources/updated for ``uri`` to the sessions subscribed to it."""
        targets = list(subscribers.get(uri, ()))
        for session in targets:
            with contextlib.suppress(Exception):
                await session.send_resource_updated(AnyUrl(uri))
        return f"notified={len(targets)}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, help="required for the HTTP transports; ignored for stdio")
    parser.add_argument("--transport", choices=("streamable-http", "sse", "stdio"), default="streamable-http")
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    args = parser.parse_args(argv)
    if args.port is None and args.transport != "stdio":
        parser.error(f"--port is required for --transport {args.transport}")
    mcp = build_server(json_response=args.json_response, stateless=args.stateless, log_level=args.log_level)
    if args.port is not None:
        mcp.settings.port = args.port
    mcp.run(transport=args.transport)


if __name__ == "__main__":
    main()
