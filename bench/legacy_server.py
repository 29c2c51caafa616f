"""The benchmark's handshake-era backend: mcp 1.30.0 FastMCP (runs in the legacy virtualenv).

Tools: ``add`` (no input, tiny answer), ``size`` (the length of its argument: carries 5 B, 64 KiB
or 1 MiB in with a tiny answer), ``blob`` (a result of ``size`` characters), ``ask_city`` (one form
elicitation: the two-round flow), ``book_table`` (two dependent form elicitations, the second quoting
the first answer: two input rounds, three 2026-07-28 requests; the native server's ``ask_two`` is the
same shape). ``--transport stdio`` serves one session on stdin/stdout.
"""

from __future__ import annotations

import argparse

from mcp.server.elicitation import AcceptedElicitation
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel


class City(BaseModel):
    city: str


class Day(BaseModel):
    day: str


class Time(BaseModel):
    time: str


def build(port: int) -> FastMCP:
    mcp = FastMCP("bench", host="127.0.0.1", port=port, log_level="WARNING")

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """a + b."""
        return a + b

    @mcp.tool()
    def size(text: str) -> int:
        """How many characters ``text`` has."""
        return len(text)

    @mcp.tool()
    def blob(size: int) -> str:
        """``size`` characters of text."""
        return "x" * size

    @mcp.tool()
    async def ask_city(ctx: Context) -> str:
        """One form elicitation."""
        answer = await ctx.elicit("Which city?", City)
        if isinstance(answer, AcceptedElicitation):
            return f"city={answer.data.city}"
        return f"action={answer.action}"

    @mcp.tool()
    async def book_table(ctx: Context) -> str:
        """Two dependent form elicitations: the second question quotes the first answer."""
        day = await ctx.elicit("Which day?", Day)
        if not isinstance(day, AcceptedElicitation):
            return f"action={day.action}"
        time = await ctx.elicit(f"At what time on {day.data.day}?", Time)
        if not isinstance(time, AcceptedElicitation):
            return f"action={time.action}"
        return f"booked={day.data.day} {time.data.time}"

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--transport", choices=("streamable-http", "stdio"), default="streamable-http")
    args = parser.parse_args()
    build(args.port).run(transport=args.transport)


if __name__ == "__main__":
    main()
