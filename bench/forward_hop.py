"""The floor: a bare aiohttp reverse proxy that forwards every request and streams the answer back.

No parsing, no translation, no state: what any Python proxy hop costs. The benchmark compares
the gateway against this, so the gateway's own work is the difference.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

_SKIP = {"host", "content-length", "transfer-encoding", "connection"}


def forward_app(target: str) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)  # carries what the gateway carries
    key = web.AppKey("http", aiohttp.ClientSession)

    async def client(app: web.Application):  # type: ignore[no-untyped-def]
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False) as session:
            app[key] = session
            yield

    async def forward(request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP}
        body = await request.read()
        async with app[key].request(request.method, target, headers=headers, data=body) as upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in _SKIP},
            )
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except aiohttp.ClientConnectionResetError:
                pass  # the client went away (e.g. a stream closed at shutdown)
            return response

    app.cleanup_ctx.append(client)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def main() -> None:
    """``python -m bench.forward_hop --port P --target URL``: the hop as its own process (its CPU
    time is then measured like the gateway's)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--target", required=True)
    args = parser.parse_args()
    web.run_app(forward_app(args.target), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
