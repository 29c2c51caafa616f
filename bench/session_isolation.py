"""What per-request isolation of roots costs (docs/session-state.md): two clients with different
roots take turns through one anonymous route, with the gateway as it is (a session given a client's
roots answer is closed after its call) and with that rule switched off (the session is reused, and
the second client sees the first client's roots: the leak issue 17 reports).

    .venv/bin/python -m bench.session_isolation [calls]

Needs the published npm servers (``scripts/bootstrap.sh``). Prints, per server and mode, the
median and 95th percentile of one call as the client sees it (every input round included), the
backend sessions opened and the rounds the clients were asked.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests")]

from harness import route, running_gateway  # noqa: E402
from interop.test_published_servers import BACKEND, everything_server, npm_server, published_stdio_route  # noqa: E402
from interop.test_session_isolation import Roots, client_of  # noqa: E402

from gateway import keys  # noqa: E402
from gateway.calls import backend  # noqa: E402


async def alternate(route_: dict[str, Any], tool: str, roots: tuple[Roots, Roots], calls: int) -> dict[str, float]:
    seconds: list[float] = []
    async with (
        running_gateway([route_]) as gateway,
        client_of(gateway, None, list_roots_callback=roots[0]) as first,
        client_of(gateway, None, list_roots_callback=roots[1]) as second,
    ):
        (runtime,) = gateway.app[keys.ROUTES].values()
        for client in (first, second):  # warm: both clients' first call is not measured
            await client.call_tool(tool, {})
        opened, asked = runtime.pool.initializations, roots[0].asked + roots[1].asked
        for i in range(calls):
            started = time.perf_counter()
            await (first, second)[i % 2].call_tool(tool, {})
            seconds.append(time.perf_counter() - started)
        opened, asked = runtime.pool.initializations - opened, roots[0].asked + roots[1].asked - asked
    seconds.sort()
    return {
        "median_ms": 1000 * statistics.median(seconds),
        "p95_ms": 1000 * seconds[int(0.95 * (len(seconds) - 1))],
        "sessions_opened": opened,
        "roots_asked": asked,
    }


async def main(calls: int) -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="bench-isolation-"))
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [Path(tmp) / "alpha", Path(tmp) / "beta"]
        for directory in dirs:
            directory.mkdir()
        cases: list[tuple[str, dict[str, Any], str, tuple[str, str]]] = [
            (
                "server-filesystem (stdio)",
                published_stdio_route([npm_server("filesystem")], prewarm=2),
                "list_allowed_directories",
                (dirs[0].as_uri(), dirs[1].as_uri()),
            )
        ]
        with everything_server("streamableHttp", log_dir) as url:
            cases.insert(
                0,
                (
                    "server-everything (streamable HTTP)",
                    route("everything", "/mcp", url, backend=BACKEND),
                    "get-roots-list",
                    ("file:///srv/alpha", "file:///srv/beta"),
                ),
            )
            for name, route_, tool, uris in cases:
                for mode, rule in (("isolated", frozenset({"roots/list"})), ("shared (before)", frozenset())):
                    backend.SESSION_STATE_ANSWERS = rule
                    roots = (Roots((uris[0],)), Roots((uris[1],)))
                    result = await alternate(route_, tool, roots, calls)
                    print(f"{name:38} {mode:16} " + "  ".join(f"{k}={v:.1f}" for k, v in result.items()))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
