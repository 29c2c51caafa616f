"""Event-loop lag: how late the loop runs a timer, measured by one small task the app owns.

Every request, retry and backend stream of a replica shares one event loop. Code that does not
yield (a large JSON decode, a slow parser, a blocking call) delays all of them, and request
latency shows it only mixed with the backend's time. A task that asks to wake up after
``interval`` seconds and notes how much later it actually ran measures exactly that delay, with
no instrumentation of the code that causes it.

The task is started and stopped by an aiohttp cleanup context (:func:`loop_lag_context`, handed
what to observe by the app that builds it), in a task group the context owns, so it lives exactly
as long as the app and is cancelled and awaited on shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Final

from aiohttp import web

from gateway.owned import TaskGroup

INTERVAL: Final = 0.5
"""Seconds between two measurements: frequent enough to see a stall of a few hundred
milliseconds in a 15 s scrape, cheap enough to cost nothing (two timer wake-ups a second)."""


async def measure(observe: Callable[[float], None], interval: float = INTERVAL) -> None:
    """Sleep ``interval`` seconds, observe how late the wake-up came, forever."""
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time()
        await asyncio.sleep(interval)
        observe(max(loop.time() - asked - interval, 0.0))


def loop_lag_context(observe: Callable[[float], None]) -> Callable[[web.Application], AsyncIterator[None]]:
    """A cleanup context in which the measuring task runs while the app does, handing each lag to ``observe``."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        async with TaskGroup("event-loop-lag") as tasks:
            tasks.spawn(measure(observe), name="event-loop-lag")
            yield

    return context
