"""``python -m bench.healthz_probe URL``: asks ``URL`` (``/healthz``) back to back, 5 ms apart, from a
process of its own, and prints one line per answer: ``<start, monotonic seconds> <latency ms>``.

The large-result section parses a 4 MiB answer on its own event loop (about 10 ms of work the probe
would wait for if it shared that loop), so a probe in the benchmark's process measured the
benchmark as much as the gateway. In a process of its own it sees the gateway's event loop only
(and the machine's scheduler). Commands on stdin: ``run`` starts probing, ``pause`` stops after the
answer in flight and prints ``paused``; end of stdin ends the process. Only 127.0.0.1 is probed.
"""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp

PACING = 0.005


async def probe(url: str) -> None:
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    running = asyncio.Event()
    closed = asyncio.Event()

    async def read_commands() -> None:
        while line := await commands.readline():
            if line.strip() == b"run":
                running.set()
            elif line.strip() == b"pause":
                running.clear()
        closed.set()
        running.set()

    reader = asyncio.create_task(read_commands())
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        while not closed.is_set():
            if not running.is_set():
                print("paused", flush=True)
                await running.wait()
                continue
            started = time.monotonic()
            async with http.get(url) as resp:
                await resp.read()
            print(f"{started:.6f} {(time.monotonic() - started) * 1000:.3f}", flush=True)
            if running.is_set():
                await asyncio.sleep(PACING)
    reader.cancel()


if __name__ == "__main__":
    asyncio.run(probe(sys.argv[1]))
