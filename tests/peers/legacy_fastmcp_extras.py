"""Legacy behaviours the main legacy peer does not have (its tools are a contract shared with the native
peer), on ``mcp==1.30.0`` FastMCP: a server that asks ``roots/list`` as soon as a session is
initialized and caches the answer (as file-system-style servers do to learn their allowed
directories), and a url-mode elicitation.

Run it with the legacy interpreter::

    .venv-legacy/bin/python tests/peers/legacy_fastmcp_extras.py --port N

Streamable HTTP on ``http://127.0.0.1:N/mcp``, stateful, SSE responses (the default); with
``--transport sse`` the HTTP+SSE transport on ``http://127.0.0.1:N/sse``; with ``--transport stdio``
newline-delimited JSON-RPC on stdin/stdout. FastMCP has no "initialized"
hook, so the low-level server's message handler is wrapped: on ``notifications/initialized`` it asks
``session.list_roots()``, which 1.30.0 sends unrelated to any request, i.e. on the standalone GET
stream, while no client request is in flight. Tools:

* ``startup_roots`` - what the session-start request got, *without waiting for it*: the root URIs,
  or ``STARTUP_ROOTS_PENDING`` when the answer has not arrived yet (the server would run the tool
  without its roots), or ``STARTUP_ROOTS_FAILED`` when the request was refused;
* ``ask_url`` - one url-mode ``elicitation/create`` (2025-11-25) on the call's POST stream;
* ``add`` - needs nothing from the client.
"""

from __future__ import annotations

import argparse
import weakref
from typing import Any

from contract import STARTUP_ROOTS_FAILED, STARTUP_ROOTS_PENDING, startup_roots_text
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.session import ServerSession
from mcp.shared.exceptions import McpError
from mcp.types import ClientNotification, InitializedNotification


def build_server(*, log_level: str) -> FastMCP:
    mcp = FastMCP("mrtr-legacy-extras-peer", host="127.0.0.1", log_level=log_level)  # type: ignore[arg-type]
    startup: weakref.WeakKeyDictionary[ServerSession, str] = weakref.WeakKeyDictionary()
    server = mcp._mcp_server
    handle_message = server._handle_message

    async def ask_roots_at_start(session: ServerSession) -> None:
        try:
            result = await session.list_roots()
        except McpError:
            startup[session] = STARTUP_ROOTS_FAILED
            return
        startup[session] = startup_roots_text([str(root.uri) for root in result.roots])

    async def handle(
        message: Any, session: ServerSession, lifespan_context: Any, raise_exceptions: bool = False
    ) -> None:
        await handle_message(message, session, lifespan_context, raise_exceptions)
        if isinstance(message, ClientNotification) and isinstance(message.root, InitializedNotification):
            # Each message is handled in its own task, so waiting for the answer here blocks nothing.
            await ask_roots_at_start(session)

    server._handle_message = handle  # type: ignore[method-assign]

    @mcp.tool()
    def startup_roots(ctx: Context) -> str:
        """The roots this session was given when it started (never waits for them)."""
        return startup.get(ctx.session, STARTUP_ROOTS_PENDING)

    @mcp.tool()
    async def ask_url(ctx: Context) -> str:
        """One url-mode elicitation."""
        answer = await ctx.elicit_url("Sign in to continue", "https://example.com/login", "login-1")
        return f"action={answer.action}"

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers; needs no client input."""
        return a + b

    return mcp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="HTTP port (streamable-http and sse)")
    parser.add_argument("--transport", default="streamable-http", choices=("streamable-http", "sse", "stdio"))
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    args = parser.parse_args(argv)
    mcp = build_server(log_level=args.log_level)
    mcp.settings.port = args.port
    mcp.run(transport=args.transport)


if __name__ == "__main__":
    main()
