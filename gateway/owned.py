"""Background work with an owner: every task the gateway starts outside a request belongs to a group.

A hold that expires answers its backend, an abandoned call is cancelled upstream, a dead session is
closed: work that must not block the request that caused it. ``asyncio.create_task`` alone leaves
such a task without an owner — nobody awaits it at shutdown, and the loop may collect it half-way
("Task was destroyed but it is pending"). A :class:`TaskGroup` keeps a strong reference to each of
its tasks until it ends, logs a failure instead of losing it, and is closed by the application's
cleanup context that created it (create, yield, cancel, await), after the work that may still spawn
into it has stopped (:mod:`gateway.app`).

Not :class:`asyncio.TaskGroup`: that one cancels every sibling when one task fails, and must be
entered and left by one task, while an aiohttp cleanup context starts in one task and ends in another.
Used as ``async with TaskGroup(name) as tasks:``, the group is owned by the block: leaving it ends
every task (:meth:`aclose`), so work that lives exactly as long as a block (a reaper, a watcher, the
event-loop lag probe) is spawned into it and needs no cancel-and-await of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

import structlog

log = structlog.get_logger("gateway.owned")


class TaskGroup:
    """A set of background tasks that ends together: :meth:`spawn` adds one, :meth:`aclose` ends all."""

    __slots__ = ("_closed", "_tasks", "name")  # every legacy session and held exchange has one

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    async def __aenter__(self) -> TaskGroup:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def spawn(self, coro: Coroutine[Any, Any, None], *, name: str | None = None) -> asyncio.Task[None]:
        """Run ``coro`` in the background, owned by this group until it ends.

        After :meth:`aclose` the coroutine is still run (so the work it does, e.g. handing a session
        back, is not skipped silently) but it is cancelled at its first wait, like its siblings were.
        """
        task = asyncio.get_running_loop().create_task(coro, name=name or f"{self.name}-task")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        if self._closed:
            # Not task.cancel() at once: a task cancelled before its first step never runs a line.
            asyncio.get_running_loop().call_soon(task.cancel)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background_task_failed", group=self.name, task=task.get_name(), exc_info=task.exception())

    async def wait(self) -> None:
        """Wait until every task spawned so far (and any they spawn meanwhile) has ended."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel every task and wait until all have ended; tasks spawned later are cancelled at once."""
        self._closed = True
        while self._tasks:
            pending = list(self._tasks)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)


FINISH_GRACE = 15.0
"""Seconds :func:`finish_then_close` lets a group's work finish: a stdio server's stop takes at most
about 12 s (stdin closed, SIGTERM, SIGKILL, each waited for), an HTTP session's DELETE its timeout."""


async def finish_then_close(group: TaskGroup, grace: float = FINISH_GRACE) -> None:
    """Let the work under way in ``group`` finish, up to ``grace`` seconds, then :meth:`~TaskGroup.aclose`
    it: for groups of closes, each bounded, that cancelled half-way would leave a process unreaped or a
    connection unclosed."""
    try:
        async with asyncio.timeout(grace):
            await group.wait()
    except TimeoutError:
        log.warning("background_work_cut_short", group=group.name, grace=grace)
    await group.aclose()
