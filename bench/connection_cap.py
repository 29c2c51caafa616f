"""A thousand clients at once, nothing lost (issue 20): concurrent two-round calls at the
connection cap.

A gateway (``mrtr-gateway serve`` as a subprocess, so the connection cap of ``gateway.server``
applies) fronts :mod:`bench.light_server`; every setting is the default except the route's
``backend.max_sessions`` (raised above the number of clients) and whatever ``--listen`` adds. Each
client is a program of its own: its own HTTP connection pool (keep-alive, as aiohttp does) and its
own credential (``Authorization: Bearer client-<n>``, so the per-principal hold budget is not what
is measured). All clients start ``tools/call ask`` at once; each retries with its answer as soon as
its ``InputRequiredResult`` arrives. A client that gets HTTP 503 waits its ``Retry-After`` and sends
the same request again (what a well-behaved client does), at most :data:`ATTEMPTS` times.

Printed: calls completed, calls **lost** (no HTTP answer: a reset, a closed connection, a timeout;
the issue's figure), 503s met along the way, other failures, and the gateway's ``mrtr_gateway_holds``
once every client is done (a lost retry leaves its hold until ``holds.ttl``: it must be 0).

    .venv/bin/python -m bench.connection_cap [--clients 1000] [--listen 'max_connections: 500']
        [--client-lag 20] [--fresh-connections]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import MODERN, Modern, Processes, free_port, gateway_config, wait_http

ATTEMPTS = 20
"""Most times one request is sent again after a 503 (with ``Retry-After``)."""
TIMEOUT = aiohttp.ClientTimeout(total=120)


class Lost(Exception):
    """A request that got no HTTP answer (reset, closed connection, timeout)."""


async def _post(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], auth: str, tally: collections.Counter[str]
) -> dict[str, Any]:
    headers = {**Modern.headers(body["params"]["name"]), "Authorization": auth}
    for _ in range(ATTEMPTS):
        try:
            async with http.post(url, json=body, headers=headers, timeout=TIMEOUT) as resp:
                raw = await resp.read()
                if resp.status == 503:
                    tally["http_503"] += 1
                    if "Retry-After" not in resp.headers:
                        tally["503_without_retry_after"] += 1
                    await asyncio.sleep(float(resp.headers.get("Retry-After", "1")))
                    continue
                if resp.status != 200:
                    raise RuntimeError(f"HTTP {resp.status}: {raw[:200]!r}")
                message: dict[str, Any] = json.loads(raw)
                return message
        except (aiohttp.ClientConnectionError, aiohttp.ServerTimeoutError, TimeoutError, ConnectionError) as exc:
            tally[f"lost:{type(exc).__name__}"] += 1
            raise Lost(type(exc).__name__) from exc
    raise RuntimeError(f"still 503 after {ATTEMPTS} attempts")


async def _client(index: int, url: str, start: asyncio.Event, tally: collections.Counter[str], fresh: bool) -> str:
    auth = f"Bearer client-{index}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=fresh)) as http:
        modern = Modern(http, url)
        await start.wait()
        try:
            first = await _post(http, url, modern.body("ask", {}), auth, tally)
            result = first["result"]
            if result.get("resultType") != "input_required":
                return f"unexpected first answer: {str(first)[:100]}"
            answers = {k: {"action": "accept", "content": {"city": "Paris"}} for k in result["inputRequests"]}
            extra = {"inputResponses": answers, "requestState": result["requestState"]}
            done = await _post(http, url, modern.body("ask", {}, extra), auth, tally)
            text = done["result"]["content"][0]["text"]
            return "completed" if text == "city=Paris" else f"unexpected result: {text[:100]}"
        except Lost:
            return "lost"
        except Exception as exc:  # tallied and printed, never raised
            return f"failed: {exc}"[:160]


async def _metric(base: str, name: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(base + "/metrics") as resp:
        text = await resp.text()
    found = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else float("nan")


async def _lag(block: float) -> None:
    """A busy client machine: the client's event loop blocked ``block`` seconds out of every 50 ms
    (replies sit unread meanwhile, as they do behind a loaded CPU)."""
    while True:
        await asyncio.sleep(0.05)
        time.sleep(block)  # noqa: ASYNC251 - blocking the loop is the point


async def run(clients: int, listen: str, fresh: bool, lag: float = 0.0) -> dict[str, Any]:
    backend_port, gateway_port = free_port(), free_port()
    backend = f"http://127.0.0.1:{backend_port}/mcp"
    route = f"{{name: cap, path: /mcp, backend: {{url: '{backend}', max_sessions: {clients + 100}}}}}"
    config = gateway_config(gateway_port, [route])
    if listen:
        config = config.replace(
            "listen: {host: 127.0.0.1, port: " + str(gateway_port),
            "listen: {host: 127.0.0.1, port: " + str(gateway_port) + ", " + listen,
            1,
        )
    procs = Processes()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
        cfg.write(config)
    base = f"http://127.0.0.1:{gateway_port}"
    try:
        procs.start([sys.executable, "-m", "bench.light_server", "--port", str(backend_port)])
        procs.start([sys.executable, "-m", "gateway", "serve", "--config", cfg.name], log=True)
        await wait_http(base + "/mcp")
        await wait_http(backend)
        tally: collections.Counter[str] = collections.Counter()
        start = asyncio.Event()
        tasks = [asyncio.create_task(_client(i, base + "/mcp", start, tally, fresh)) for i in range(clients)]
        await asyncio.sleep(0.5)  # every client is waiting on the event
        lagging = asyncio.create_task(_lag(lag)) if lag else None
        began = time.perf_counter()
        start.set()
        outcomes = collections.Counter(await asyncio.gather(*tasks))
        seconds = time.perf_counter() - began
        if lagging is not None:
            lagging.cancel()
        await asyncio.sleep(1.0)  # let the last holds end
        holds = await _metric(base, "mrtr_gateway_holds")
        refused = await _metric(base, 'mrtr_gateway_rejections_total\\{reason="max_connections"\\}')
    finally:
        procs.stop()
        Path(cfg.name).unlink()
    return {
        "clients": clients,
        "completed": outcomes.pop("completed", 0),
        "lost": outcomes.pop("lost", 0),
        "other": dict(outcomes),
        "events": dict(tally),
        "holds_after": holds,
        "refused_at_cap": refused,
        "seconds": round(seconds, 1),
        "protocol": MODERN,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument(
        "--listen", default="", help="extra listen settings, YAML flow style, e.g. 'max_connections: 200'"
    )
    parser.add_argument(
        "--fresh-connections", action="store_true", help="one connection per request (clients that never reuse one)"
    )
    parser.add_argument(
        "--client-lag",
        type=float,
        default=0.0,
        help="ms the client's event loop is blocked every 50 ms (a busy machine)",
    )
    args = parser.parse_args()
    out = asyncio.run(run(args.clients, args.listen, args.fresh_connections, args.client_lag / 1000))
    print(
        f"clients {out['clients']}  completed {out['completed']}  lost {out['lost']}  "
        f"holds after {out['holds_after']:.0f}  refused at cap {out['refused_at_cap']:.0f}  ({out['seconds']} s)"
    )
    print(f"  events: {out['events']}  other outcomes: {out['other']}")
    raise SystemExit(1 if out["lost"] or out["other"] or out["holds_after"] else 0)


if __name__ == "__main__":
    main()
