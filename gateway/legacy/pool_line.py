"""The line of calls waiting for a session of one route's pool (:mod:`gateway.legacy.pool`).

A call that can have no session at once joins the line and waits, in arrival order, until it is
woken (a release, a close, an open that ended: the first in line looks again) or its deadline
passes. The pool decides what each look finds; the line only keeps the order and the wake-ups.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass, field


@dataclass(eq=False)
class Waiter:
    """A call waiting for a session, in line: woken when one may have become available."""

    woken: asyncio.Event = field(default_factory=asyncio.Event)


class WaitingLine:
    """The calls waiting for a session, first come first served."""

    def __init__(self) -> None:
        self._waiters: deque[Waiter] = deque()

    def __len__(self) -> int:
        return len(self._waiters)

    def is_first(self, waiter: Waiter | None) -> bool:
        """Nobody is in line, or ``waiter`` is the first of it."""
        return not self._waiters or self._waiters[0] is waiter

    def join(self, waiter: Waiter | None) -> Waiter:
        """``waiter``, in line (a new one at its end when None), to be woken from now on."""
        if waiter is None:
            waiter = Waiter()
            self._waiters.append(waiter)
        waiter.woken.clear()
        return waiter

    @staticmethod
    async def wait(waiter: Waiter, timeout: float | None) -> None:
        """Until ``waiter`` is woken, or ``timeout`` seconds have passed (None: no limit)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await waiter.woken.wait()

    def leave(self, waiter: Waiter) -> None:
        """``waiter`` is out of line (served, refused or cancelled): whoever is next looks again."""
        self._waiters.remove(waiter)
        self.wake()

    def wake(self) -> None:
        """Something changed (a release, a close, an open ended): the first in line looks again."""
        if self._waiters:
            self._waiters[0].woken.set()
