"""Spare stdio processes: started ahead of need so a cold call only pays for the handshake.

Starting a stdio server's interpreter (imports, framework set-up) is most of what a new stdio
session costs; the ``initialize`` handshake after it is a few milliseconds. A spare is a process
that was started with :meth:`~gateway.legacy.stdio.StdioSession.spawn` and waits, with no
handshake yet, because the capabilities it must declare belong to the client of the call that
will take it (:meth:`~gateway.legacy.stdio.StdioSession.adopt`). The route's ``prewarm`` says how
many to keep; each spare counts in ``max_sessions`` like the session it will become.

Spares are kept while the route is in use: once no call has leased a session for
``session_idle`` seconds they are stopped like idle sessions, and started again at the next lease.
A spare that exits while waiting is discarded when taken or reaped. When one fails to start, no
new spare is tried for :data:`SPARE_RETRY_SECONDS` (a broken command would otherwise be retried
every reap); calls still start their own process and report the failure.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from gateway.errors import BackendUnavailable
from gateway.legacy.stdio import StdioSession
from gateway.tasks import TaskGroup

log = structlog.get_logger("gateway.pool")

SPARE_RETRY_SECONDS = 30.0


class StdioSpares:
    """Up to ``want`` started, idle stdio processes of one route."""

    def __init__(
        self,
        factory: Callable[[], StdioSession],
        want: int,
        *,
        tasks: TaskGroup,
        room: Callable[[], bool],
        on_ready: Callable[[], None],
    ) -> None:
        self._factory = factory
        self._group = tasks
        """The pool's task group owns the starts and closes (ended at shutdown)."""
        self._want = want
        self._room = room
        """Whether the route's bound leaves room for one more process."""
        self._on_ready = on_ready
        self._ready: list[StdioSession] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._failed_at = -SPARE_RETRY_SECONDS
        self._closed = False

    def __len__(self) -> int:
        """Processes ready or being started (each counts in ``max_sessions``)."""
        return len(self._ready) + len(self._tasks)

    @property
    def ready(self) -> int:
        return len(self._ready)

    def take(self) -> StdioSession | None:
        """A started process that is still running, if one is ready."""
        while self._ready:
            spare = self._ready.pop()
            if spare.spawned:
                return spare
            self._discard(spare)
        return None

    def top_up(self) -> None:
        """Start spares until ``want`` are ready or starting (within the route's bound)."""
        if self._closed or time.monotonic() - self._failed_at < SPARE_RETRY_SECONDS:
            return
        while len(self) < self._want and self._room():
            task = self._group.spawn(self._start(), name="legacy-stdio-spare")
            self._tasks.add(task)
            task.add_done_callback(self._started)

    def reap(self, *, idle: bool) -> None:
        """Forget spares whose process has exited; close them all when the route is ``idle`` (no
        lease for ``session_idle``: spares are kept only for a route in use)."""
        for spare in [s for s in self._ready if idle or not s.spawned]:
            self._ready.remove(spare)
            self._discard(spare)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        ready, self._ready = self._ready, []
        await asyncio.gather(*self._tasks, *(s.close() for s in ready), return_exceptions=True)

    async def _start(self) -> None:
        spare = self._factory()
        try:
            await spare.spawn()
        except BackendUnavailable as exc:
            self._failed_at = time.monotonic()
            log.warning("stdio_spare_failed", reason=exc.reason, detail=exc.detail)
            return
        if self._closed:
            await spare.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.discard(task)  # counted once from here on: as ready
        self._ready.append(spare)

    def _started(self, task: asyncio.Task[None]) -> None:
        """Once the start is no longer counted: a spare is ready, or its place in the bound is free."""
        self._tasks.discard(task)
        if not self._closed:
            self._on_ready()

    def _discard(self, spare: StdioSession) -> None:
        task = self._group.spawn(spare.close(), name="legacy-stdio-spare-close")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
