"""Waiting in tests: one bounded poll, for the conditions no event announces.

A test waits on an :class:`asyncio.Event` (or a future, or a process's exit) when the code
under test offers one. Otherwise it polls the condition itself with :func:`eventually` (or
:func:`eventually_sync` where no event loop runs), never a fixed sleep that hopes the thing
has happened by then. A poll that runs out fails the test with an ``AssertionError`` that
says what was awaited and what the probe last saw.

A sleep that *is* the behaviour under test (a backend that stays silent, a deliberate delay,
waiting out a TTL on purpose, pacing a load) stays a sleep, with a comment saying so.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

import aiohttp

Describe = str | Callable[[], str]


def _message(timeout: float, what: Describe, last: object) -> str:
    text = what() if callable(what) else what
    seen = repr(last)
    return f"not within {timeout:g} s: {text} (the probe last saw {seen[:500]}{'...' if len(seen) > 500 else ''})"


async def eventually(
    probe: Callable[[], Any],
    *,
    what: Describe,
    timeout: float = 10.0,
    interval: float = 0.01,
    ignoring: tuple[type[BaseException], ...] = (),
) -> Any:
    """Call ``probe`` (a plain or an async callable) until it returns a truthy value; return that value.

    ``what`` names the condition for the failure message (a callable is asked only on failure).
    ``ignoring``: exceptions that mean "not yet" (e.g. ``aiohttp.ClientConnectionError`` while a
    listener is not up). The whole wait, probes included, is bounded by ``timeout`` seconds.
    """
    last: object = None
    try:
        async with asyncio.timeout(timeout) as bound:
            while True:
                try:
                    value = probe()
                    if inspect.isawaitable(value):
                        value = await value
                except ignoring as exc:
                    last = exc
                else:
                    if value:
                        return value
                    last = value
                await asyncio.sleep(interval)
    except TimeoutError:
        if not bound.expired():
            raise
        raise AssertionError(_message(timeout, what, last)) from None


def eventually_sync(probe: Callable[[], Any], *, what: Describe, timeout: float = 10.0, interval: float = 0.05) -> Any:
    """:func:`eventually` for code with no running event loop (``probe`` is a plain callable)."""
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() > deadline:
            raise AssertionError(_message(timeout, what, value))
        time.sleep(interval)
    return value


async def until_status(
    http: aiohttp.ClientSession, url: str, status: int = 200, *, timeout: float = 30.0, interval: float = 0.05
) -> None:
    """GET ``url`` until it answers ``status`` (a listener not up yet counts as "not yet")."""

    async def answered() -> bool:
        async with http.get(url) as resp:
            return resp.status == status

    await eventually(
        answered,
        what=f"GET {url} answers {status}",
        timeout=timeout,
        interval=interval,
        ignoring=(aiohttp.ClientConnectionError,),
    )
