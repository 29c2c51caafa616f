"""A native MCP 2026-07-28 server on ``mcp==2.3.0`` ``MCPServer``: the reference the gateway must match.

Run it with the modern interpreter::

    .venv/bin/python tests/peers/native_mcpserver.py --port N [--log-level LEVEL]

Streamable HTTP on ``http://127.0.0.1:N/mcp``. It offers the same tool names, prompt and resources as
``legacy_fastmcp.py`` with the same result strings, so a 2026-07-28 client flow against
gateway + legacy peer can be compared with the same flow against this server.

Multi-round input is expressed the way the SDK intends: a tool parameter annotated
``Annotated[T, Resolve(fn)]`` is filled by a *resolver* that returns a request marker
(``Elicit``, ``Sample``, ``ListRoots``). On a 2026-07-28 request the framework collects every
pending marker of a round into one ``InputRequiredResult`` (keys are the resolvers'
``module:qualname``), records answered outcomes in the sealed ``requestState`` (AES-GCM,
per-process ephemeral key) and re-runs the tool on the retry; on a handshake-era request
(``mode="legacy"``) the same resolvers send inline server-to-client requests instead. Tool bodies
therefore run once, after all input has arrived.

Where this differs from the legacy peer, as seen by a client:

* ``ask_two`` - the second resolver depends on the first, so the questions arrive in two rounds
  (two ``InputRequiredResult``\\ s), which is what a gateway in front of the legacy peer must
  also produce.
* ``ask_and_sample`` - the legacy peer has an elicitation and a sampling request in flight at
  once; here both independent resolvers land in the *same* round's ``inputRequests`` (one
  round, two keys). In ``mode="legacy"`` the resolvers run one after the other, so the two
  inline requests are sequential rather than concurrent.
* ``count`` / logging - ``notifications/message`` reach a 2026-07-28 client only when it opts in
  with ``_meta["io.modelcontextprotocol/logLevel"]`` (``Client(log_level=...)``), and progress only
  with a progress token.
* ``whoami`` reads ``ctx.headers`` ("none" when absent).
"""

from __future__ import annotations

import argparse
from typing import Annotated

import anyio
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
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageResult,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    TextContent,
)
from pydantic import Field


def _sampled_text(result: CreateMessageResult) -> str:
    content = result.content
    if isinstance(content, TextContent):
        return content.text
    return f"<{type(content).__name__}>"


# Resolvers live at module level: the framework reads their annotations with get_type_hints.


async def ask_city_resolver() -> Elicit[City]:
    return Elicit(CITY_QUESTION, City)


async def ask_name_resolver() -> Elicit[Name]:
    return Elicit(NAME_QUESTION, Name)


async def ask_color_resolver(
    name: Annotated[ElicitationResult[Name], Resolve(ask_name_resolver)],
) -> Elicit[Color] | None:
    # Nothing to ask once the first question was refused; the tool body reports that outcome.
    if not isinstance(name, AcceptedElicitation):
        return None
    return Elicit(color_question(name.data.name), Color)


async def summary_resolver(text: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=SUMMARY_PROMPT.format(text=text)))],
        max_tokens=100,
    )


async def city_sampling_resolver() -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=CITY_SAMPLING_PROMPT))],
        max_tokens=100,
    )


async def roots_resolver() -> ListRoots:
    return ListRoots()


def build_server(*, log_level: str) -> MCPServer:
    mcp = MCPServer("mrtr-native-peer", log_level=log_level)  # type: ignore[arg-type]

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
    async def ask_city(city: Annotated[ElicitationResult[City], Resolve(ask_city_resolver)]) -> str:
        """One form elicitation."""
        if isinstance(city, AcceptedElicitation):
            return f"city={city.data.city}"
        return f"action={city.action}"

    @mcp.tool()
    async def ask_two(
        name: Annotated[ElicitationResult[Name], Resolve(ask_name_resolver)],
        color: Annotated[ElicitationResult[Color], Resolve(ask_color_resolver)],
    ) -> str:
        """Two dependent elicitations: the second question quotes the first answer."""
        if not isinstance(name, AcceptedElicitation):
            return f"action={name.action}"
        if not isinstance(color, AcceptedElicitation):
            return f"action={color.action}"
        return f"name={name.data.name};color={color.data.color}"

    @mcp.tool()
    async def summarize(text: str, sampled: Annotated[CreateMessageResult, Resolve(summary_resolver)]) -> str:
        """One sampling request."""
        return f"sampled={_sampled_text(sampled)}"

    @mcp.tool()
    async def show_roots(roots: Annotated[ListRootsResult, Resolve(roots_resolver)]) -> str:
        """One roots/list request."""
        return "roots=" + ",".join(str(root.uri) for root in roots.roots)

    @mcp.tool()
    async def ask_and_sample(
        city: Annotated[ElicitationResult[City], Resolve(ask_city_resolver)],
        sampled: Annotated[CreateMessageResult, Resolve(city_sampling_resolver)],
    ) -> str:
        """An elicitation and a sampling request, asked in the same round."""
        if not isinstance(city, AcceptedElicitation):
            return f"action={city.action}"
        return f"city={city.data.city};sampled={_sampled_text(sampled)}"

    @mcp.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer; for timeout and cancellation tests."""
        await anyio.sleep(seconds)
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
        headers = ctx.headers
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

    return mcp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    args = parser.parse_args(argv)
    mcp = build_server(log_level=args.log_level)
    mcp.run(transport="streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
