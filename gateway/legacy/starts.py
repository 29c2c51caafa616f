"""Starting stdio server processes: a gateway-wide budget, and each route's start health.

Starting a server's interpreter is CPU work (imports, framework set-up: about a second of a core
for a Python SDK server). Forty stdio routes with ``prewarm: 2`` once started 82 interpreters at
the same moment on two cores: load 24-36, ``/healthz`` p95 at 200-230 ms, and the first call 13 s
after ``/readyz`` said ready. So:

* :class:`StartBudget` - at most ``limits.max_process_starts`` (default: the CPU count) processes
  are being started at once across all routes. A start holds its place from ``exec`` until the
  server has loaded: a cold call's until its ``initialize`` is answered; a spare's, to which
  nothing is written before the call that takes it sends ``initialize``, until its process tree
  has stopped using the CPU (:func:`tree_cpu_ticks`, :data:`QUIET_FOR`). Spare starts and calls'
  own starts wait in one line, in arrival order. Each route's starts also ask its
  :class:`ProcessWatch` (the memory guard, :mod:`gateway.legacy.memory`) right before ``exec``, and
  tell it the process they started.
* :class:`RouteHealth` - whether a stdio route can serve a call now: ``starting`` until its first
  process answered (or, with ``prewarm: 0``, ``ok`` at once), ``ok`` after a start succeeded,
  ``backend_failing`` after one failed (with the error's reason, never its detail: that may quote
  the server's stderr). ``/readyz`` reports it per route.
* :func:`respawn_delay` - after failed starts, the next spare waits a capped, jittered exponential
  delay (1 s doubling to 5 minutes), not a fixed interval for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import AsyncIterator, Callable
from typing import Literal, Protocol

from gateway.config.model import RouteConfig

RouteState = Literal["ok", "starting", "backend_failing"]

RESPAWN_FIRST = 1.0
RESPAWN_CAP = 300.0
QUIET_FOR = 0.15
"""Seconds a spare's process tree must use no CPU to count as loaded (waiting on its stdin): a
loading interpreter accrues a clock tick (10 ms) every few milliseconds of a core, so three samples
50 ms apart without one tell a blocked process from a busy one."""
QUIET_SAMPLE = 0.05
PROC_READABLE = os.path.isdir("/proc/self/task")
"""Whether this system has Linux's ``/proc`` (with each task's children) to read a process tree's CPU from."""


def tree_stats(pid: int) -> list[list[bytes]] | None:
    """The ``/proc/<pid>/stat`` fields after the command name (the state first) of ``pid`` and of
    each of its living descendants (``npx`` starts ``node`` as its child: the tree, not the process,
    is the server), ``pid``'s first; read from ``/proc`` (Linux). The descendants are found through
    each process's main thread (``task/<pid>/children``): a child forked by another thread is not
    seen. None where ``/proc`` cannot tell (another system), or the process is gone (exited: a zombie
    not yet reaped counts as gone). The one walk behind :func:`tree_cpu_ticks` and the memory guard's
    :func:`~gateway.legacy.memory.tree_rss`."""
    stats: list[list[bytes]] = []
    seen, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            with open(f"/proc/{current}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{current}/task/{current}/children", "rb") as children:
                todo.extend(int(child) for child in children.read().split())
        except (OSError, IndexError, ValueError):
            if current == pid:
                return None
            continue  # a descendant that ended meanwhile
        if current == pid and fields[0] == b"Z":
            return None
        stats.append(fields)
    return stats


def tree_cpu_ticks(pid: int) -> int | None:
    """CPU clock ticks (user + system) used by ``pid`` and its living descendants so far
    (:func:`tree_stats`); None where ``/proc`` cannot tell, or the process is gone."""
    stats = tree_stats(pid)
    return None if stats is None else sum(int(f[11]) + int(f[12]) for f in stats)  # utime, stime (fields 14, 15)


def default_max_starts() -> int:
    """The CPU count this process may use (its affinity mask, as a container's cpuset sets it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def respawn_delay(failures: int, rng: Callable[[], float] = random.random) -> float:
    """Seconds before the next start after ``failures`` consecutive failed ones: full jitter over a
    doubling window (1, 2, 4 ... s) capped at :data:`RESPAWN_CAP`, never under half the window."""
    if failures <= 0:
        return 0.0
    window = min(RESPAWN_CAP, RESPAWN_FIRST * 2 ** min(failures - 1, 20))
    return float(window * (0.5 + 0.5 * rng()))


class ProcessWatch(Protocol):
    """What a stdio session of one route tells whoever watches its process (the memory guard,
    :class:`~gateway.legacy.memory.RouteWatch`)."""

    def admit(self) -> None:
        """Right before ``exec``: raise (:class:`~gateway.errors.Overloaded`) if no process may start now."""

    def started(self, process: asyncio.subprocess.Process) -> None:
        """The process was started (its own process group): watch it until it has been reaped."""


class StartBudget:
    """At most ``limit`` stdio processes being started at once, gateway-wide; ``watch``, when given,
    makes each route's :class:`ProcessWatch` (every start asks it first, and tells it the process)."""

    def __init__(self, limit: int | None = None, *, watch: Callable[[RouteConfig], ProcessWatch] | None = None) -> None:
        self.limit = limit or default_max_starts()
        self._slots = asyncio.Semaphore(self.limit)
        self.in_progress = 0
        self._watch = watch

    def watch(self, route: RouteConfig) -> ProcessWatch | None:
        """The watch of ``route``'s processes, if the gateway watches them."""
        return None if self._watch is None else self._watch(route)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._slots:
            self.in_progress += 1
            try:
                yield
            finally:
                self.in_progress -= 1


class RouteHealth:
    """A stdio route's start health: its state, the last failure's reason, and the counts."""

    def __init__(self, *, prewarm: int, on_failure: Callable[[str], None] | None = None) -> None:
        self.state: RouteState = "starting" if prewarm > 0 else "ok"
        self.last_error: str | None = None
        self.consecutive_failures = 0
        self.failures = 0
        self._on_failure = on_failure

    def succeeded(self) -> None:
        self.state = "ok"
        self.consecutive_failures = 0

    def failed(self, reason: str) -> None:
        self.state = "backend_failing"
        self.last_error = reason
        self.consecutive_failures += 1
        self.failures += 1
        if self._on_failure is not None:
            self._on_failure(reason)

    def describe(self) -> dict[str, object]:
        """The route's entry in ``/readyz``: no detail, no stderr, nothing from the configuration."""
        entry: dict[str, object] = {"state": self.state}
        if self.state == "backend_failing":
            entry["last_error"] = self.last_error
            entry["consecutive_failures"] = self.consecutive_failures
        return entry
