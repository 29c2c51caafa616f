"""A legacy server (mcp 1.30.0 FastMCP, streamable HTTP) with one tool whose result is as large as
asked: ``blob(size)`` returns ``size`` characters. Used by ``bench/large_results.py``; runs in the
legacy virtualenv."""

from __future__ import annotations

import argparse

from mcp.server.fastmcp import FastMCP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    mcp = FastMCP("large-results", host="127.0.0.1", port=args.port, log_level="WARNING")

    @mcp.tool()
    def blob(size: int) -> str:
        """``size`` characters of text."""
        return "x" * size

    mcp.run(transport="streamable-http")


if __name__ == "__main__":
    main()
