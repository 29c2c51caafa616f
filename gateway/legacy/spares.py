"""Spare stdio processes: started ahead of need so a cold call only pays for the handshake.

Starting a stdio server's interpreter (imports, framework set-up) is most of what a new stdio
session costs; the ``initialize`` handshake after it is a few milliseconds. A spare is a process
that was started with :meth:`~gateway.legacy.stdio.StdioSession.spawn` and waits, with no
handshake yet, because the capabilities it must declare belong to the client of the call that
will take it (:meth:`~gateway.legacy.stdio.StdioSession.adopt`). The route's ``prewarm`` says how
many to keep; each spare counts in ``max_sessions`` like the session it will become.

Spares are kept while the route is in use: once no call has leased a session for
``session_idle`` seconds they are stopped like idle sessions, and started again at the next lease.
A spare that exits while waiting is discarded when taken or reaped.

At most ``max_opening`` spares of a route are being started at once, and each start also waits for
a place in the gateway-wide :class:`~gateway.legacy.starts.StartBudget`. A start succeeds when the
process has loaded (nothing is written to it before the ``initialize`` of the call that takes it:
see :mod:`gateway.legacy.stdio`); one that fails (cannot be started, or exits first) or a spare that
exits while waiting marks the route ``backend_failing`` in its :class:`~gateway.legacy.starts.RouteHealth`,
and the next spare waits :func:`~gateway.legacy.starts.respawn_delay` (1 s doubling to 5 min,
jittered) instead of being retried at every reap; calls still start their own process and report
the failure. A start the memory guard refuses (:mod:`gateway.legacy.memory`, ``memory_high``) is no
failure of the server: the next is tried 1 s later.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from gateway.errors import BackendUnavailable, Overloaded
from gateway.legacy.starts import RESPAWN_FIRST, RouteHealth, respawn_delay
from gateway.legacy.stdio import StdioSession
from gateway.owned import TaskGroup, finish_then_close

log = structlog.get_logger("gateway.pool")


class StdioSpares:
    """Up to ``want`` started, idle stdio processes of one route."""

    def __init__(
        self,
        factory: Callable[[], StdioSession],
        want: int,
        *,
        room: Callable[[], bool],
        on_ready: Callable[[], None],
        max_opening: int = 1,
        health: RouteHealth | None = None,
    ) -> None:
        self._factory = factory
        self._group = TaskGroup("legacy-stdio-spares")
        """The starts of spares: cancelled by :meth:`close`."""
        self._stops = TaskGroup("legacy-stdio-spare-stops")
        """The closes of spares: :meth:`close` lets them finish (each is bounded), since a close
        cancelled half-way leaves its process unreaped and its pipes open."""
        self._want = want
        self._room = room
        """Whether the route's bound leaves room for one more process."""
        self._on_ready = on_ready
        self._ready: list[StdioSession] = []
        self._starting = 0
        self._closing = 0
        self._max_opening = max_opening
        self.health = health or RouteHealth(prewarm=want)
        self._next_try = 0.0
        self._closed = False

    def __len__(self) -> int:
        """Processes ready, being started or being stopped (each counts in ``max_sessions``)."""
        return len(self._ready) + self._starting + self._closing

    @property
    def ready(self) -> int:
        return len(self._ready)

    def take(self) -> StdioSession | None:
        """A started process that is still running, if one is ready."""
        while self._ready:
            spare = self._ready.pop()
            if spare.spawned:
                return spare
            self._failed("exited", "the spare exited while waiting")
            self._discard(spare)
        return None

    def top_up(self) -> None:
        """Start spares until ``want`` are ready or starting (within the route's bound and
        ``max_opening``; not before the respawn delay after a failure)."""
        if self._closed or time.monotonic() < self._next_try:
            return
        while len(self) < self._want and self._starting < self._max_opening and self._room():
            self._starting += 1
            self._group.spawn(self._start(), name="legacy-stdio-spare").add_done_callback(self._started)

    def reap(self, *, idle: bool) -> None:
        """Forget spares whose process has exited; close them all when the route is ``idle`` (no
        lease for ``session_idle``: spares are kept only for a route in use)."""
        for spare in [s for s in self._ready if idle or not s.spawned]:
            self._ready.remove(spare)
            if not spare.spawned:
                self._failed("exited", "the spare exited while waiting")
            self._discard(spare)

    async def close(self) -> None:
        """Stop the ready spares, and every start and stop still under way."""
        self._closed = True
        ready, self._ready = self._ready, []
        await asyncio.gather(self._group.aclose(), *(s.close() for s in ready), return_exceptions=True)
        await finish_then_close(self._stops)

    async def _start(self) -> None:
        spare = self._factory()
        try:
            await spare.spawn()
        except Overloaded:  # the memory guard refused it (memory_high): not the server's failure
            self._next_try = time.monotonic() + RESPAWN_FIRST
            return
        except BackendUnavailable as exc:
            self._failed(exc.reason, exc.detail)
            return
        finally:
            self._starting -= 1
        self.health.succeeded()
        self._next_try = 0.0
        if self._closed:
            await spare.close()
            return
        self._ready.append(spare)

    def _started(self, task: asyncio.Task[None]) -> None:
        """Once the start is over: a spare is ready, or its place in the bound is free; the next
        spare starts (``max_opening`` at a time), unless the respawn delay holds it back."""
        if not self._closed:
            self._on_ready()
            self.top_up()

    def _failed(self, reason: str, detail: str) -> None:
        self.health.failed(reason)
        delay = respawn_delay(self.health.consecutive_failures)
        self._next_try = time.monotonic() + delay
        log.warning("stdio_spare_failed", reason=reason, detail=detail, retry_in=round(delay, 1))

    def _discard(self, spare: StdioSession) -> None:
        self._closing += 1
        self._stops.spawn(self._stop(spare), name="legacy-stdio-spare-close")

    async def _stop(self, spare: StdioSession) -> None:
        try:
            await spare.close()
        finally:
            self._closing -= 1
