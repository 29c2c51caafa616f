"""The ``mcp==2.3.0`` ``MCPServer`` peer served over the old HTTP+SSE transport (2024-11-05).

Run it with the modern interpreter::

    .venv/bin/python tests/peers/sse_mcpserver.py --port N [--log-level LEVEL]

``GET http://127.0.0.1:N/sse`` opens the stream; its first event names the POST endpoint
(``/messages/?session_id=<hex>``). The server is the one in ``native_mcpserver.py`` - same tools,
same result strings as ``legacy_fastmcp.py`` - so only the transport differs. Over this transport
every session is handshake-era, so its resolvers (``Elicit``, ``Sample``, ``ListRoots``) become
inline server-to-client requests, and all of them, like every response, travel on the one GET
stream.
"""

from __future__ import annotations

import argparse

from native_mcpserver import build_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    args = parser.parse_args(argv)
    mcp = build_server(log_level=args.log_level)
    mcp.run(transport="sse", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
