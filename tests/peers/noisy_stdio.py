"""A stdio server that prints on stdout besides JSON-RPC, as many published servers do.

The legacy peer (``legacy_fastmcp.py``, mcp 1.30.0 FastMCP) run on stdio, plus what real servers
print on the same stdout: a startup banner before serving, a blank line, and debug prints from
inside a tool (``chatty``), some of them JSON that is not JSON-RPC. Run it with the legacy
interpreter::

    .venv-legacy/bin/python tests/peers/noisy_stdio.py
"""

from __future__ import annotations

import json
import sys

from legacy_fastmcp import build_server


def main() -> None:
    mcp = build_server(json_response=False, stateless=False, log_level="WARNING")

    @mcp.tool()
    def chatty(text: str) -> str:
        """Prints debug lines on stdout, then answers."""
        print(f"DEBUG chatty called with {text!r}", flush=True)
        print(json.dumps({"debug": True, "length": len(text)}), flush=True)
        print("", flush=True)
        return f"chatty={text}"

    print("Noisy MCP Server running on stdio", flush=True)
    print("Listening for JSON-RPC on stdin...", file=sys.stdout, flush=True)
    mcp.run(transport="stdio")


if __name__ == "__main__":
    main()
