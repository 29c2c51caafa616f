"""The stdio memory guard: the gateway stops its stdio servers before the kernel stops the gateway.

Why ``backend.oom_score_adj`` is not enough. In Kubernetes a Burstable pod's processes get an
``oom_score_adj`` of about 1000 - 1000 x request / node memory from the kubelet (995 for a 128Mi
request), and the kernel's memcg OOM badness is rss + adj x limit / 1000. With a 512Mi limit the
servers' 1000 is worth only about 2.6 MiB more than the gateway's 995, so the kernel kills the
gateway (80-240 MB resident) before a 60 MB server; an unprivileged process cannot lower its own
score. So the gateway acts first, from its container's cgroup (:func:`read_cgroup`: the working set,
usage minus inactive file cache, as the kubelet computes it, against the limit):

* at or above ``limits.stdio_memory_high`` of the limit no new stdio server process is started
  (:meth:`StdioMemoryGuard.admit`, asked by every start right before ``exec``): a call that needs
  one gets :class:`~gateway.errors.Overloaded` (503, ``data.cause: memory_high``); a spare waits;
* at or above ``limits.stdio_memory_kill`` the server whose process tree has the most resident
  memory (:func:`tree_rss`) is killed: SIGKILL to its process group, one per check;
* a server whose tree is over its route's ``backend.max_memory`` is killed the same way, whatever
  the container. The calls on a killed server fail as on any server that died (its stdout ends:
  ``backend_unavailable``, ``stream_closed``); the pool discards its session.

Without a container limit (cgroup v2 ``max``, v1's huge value, no cgroup files: also a gateway run
outside a container, which sees the root group) only the routes' ``max_memory`` applies. RSS adds
up each process's resident pages: pages shared between processes of one tree count once per process.
The check runs on the event loop (:data:`CHECK_EVERY`), owned by the app (``gateway.app._routes``).

Cost of one :meth:`StdioMemoryGuard.check` with 50 servers of two processes each (``python -m
bench.stdio_memory_check``, 2 busy cores, 3 runs of 200 checks): 0.035 ms median (0.045 ms p95)
when it reads only the cgroup (no route sets ``max_memory``, the container under
``stdio_memory_kill``); 1.7 ms median (6-7 ms p95) when it measures every tree from ``/proc`` (every
route sets ``max_memory``, or at ``stdio_memory_kill``): at most about 0.35% of a core, on the event
loop, every :data:`CHECK_EVERY` seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from gateway.config.model import RouteConfig
from gateway.errors import Overloaded
from gateway.legacy.starts import tree_stats

log = structlog.get_logger("gateway.legacy")

CHECK_EVERY: Final = 0.5
"""Seconds between checks: a server that allocates 200 MB/s overshoots a bound by 100 MB at most
before it is seen; a check costs milliseconds (above), so twice a second is cheap."""
HIGH_LOG_EVERY: Final = 10.0
"""At most one ``stdio_memory_high`` line per this many seconds."""
CGROUP_ROOT: Final = "/sys/fs/cgroup"
CGROUP_ROOT_ENV: Final = "MRTR_GATEWAY_CGROUP_ROOT"
"""Where the container's cgroup files are read from instead (tests point it at a directory of their own)."""
NO_LIMIT: Final = 1 << 60
"""cgroup v1 has no "max": an unlimited group reads a page-rounded 2^63 - 1."""
MEMORY_HIGH: Final = "memory_high"
"""``data.cause`` of the 503 a call gets when its new process was refused."""
CONTAINER_MEMORY: Final = "container_memory"
ROUTE_MAX_MEMORY: Final = "route_max_memory"
KILL_REASONS: Final = (CONTAINER_MEMORY, ROUTE_MAX_MEMORY)
"""The ``reason`` of a ``stdio_server_killed`` line and of ``mrtr_gateway_stdio_memory_kills_total``."""
PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True, slots=True)
class Reading:
    """The container's memory as its cgroup tells it: the working set, and the limit (None: none)."""

    working_set: int
    limit: int | None

    def at_least(self, fraction: float) -> bool:
        return self.limit is not None and self.working_set >= fraction * self.limit


def cgroup_root(env: Mapping[str, str]) -> Path:
    return Path(env.get(CGROUP_ROOT_ENV) or CGROUP_ROOT)


def _stat_value(path: Path, key: bytes) -> int:
    for line in path.read_bytes().splitlines():
        name, _, value = line.partition(b" ")
        if name == key:
            return int(value)
    return 0


def read_cgroup(root: Path) -> Reading | None:
    """The container's memory from cgroup v2 (``memory.max``, ``memory.current``, ``memory.stat``
    ``inactive_file``) or else v1 (``memory/memory.limit_in_bytes``, ``memory.usage_in_bytes``,
    ``memory.stat`` ``total_inactive_file``); None when neither can be read."""
    layouts = (
        (root, "memory.max", "memory.current", b"inactive_file"),
        (root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes", b"total_inactive_file"),
    )
    for base, limit_file, usage_file, inactive_key in layouts:
        try:
            text = (base / limit_file).read_bytes().strip()
            usage = int((base / usage_file).read_bytes())
            inactive = _stat_value(base / "memory.stat", inactive_key)
            limit = None if text == b"max" or int(text) >= NO_LIMIT else int(text)
        except (OSError, ValueError):
            continue
        return Reading(max(0, usage - inactive), limit)
    return None


def tree_rss(pid: int) -> int | None:
    """Resident bytes of ``pid`` and its living descendants (:func:`~gateway.legacy.starts.tree_stats`);
    None where ``/proc`` cannot tell, or the process is gone."""
    stats = tree_stats(pid)
    return None if stats is None else sum(int(fields[21]) for fields in stats) * PAGE_BYTES  # rss (field 24)


@dataclass(eq=False, slots=True)
class _Server:
    route: str
    max_memory: int | None
    process: asyncio.subprocess.Process


class RouteWatch:
    """One route's :class:`~gateway.legacy.starts.ProcessWatch`: its starts ask the guard, its processes
    are watched under the route's name and ``backend.max_memory``."""

    __slots__ = ("_guard", "_max_memory", "_route")

    def __init__(self, guard: StdioMemoryGuard, route: str, max_memory: int | None) -> None:
        self._guard, self._route, self._max_memory = guard, route, max_memory

    def admit(self) -> None:
        self._guard.admit()

    def started(self, process: asyncio.subprocess.Process) -> None:
        self._guard.servers[process.pid] = _Server(self._route, self._max_memory, process)


class StdioMemoryGuard:
    """The gateway's stdio servers, their memory and the container's; :meth:`check` every :data:`CHECK_EVERY`."""

    def __init__(
        self,
        *,
        high: float,
        kill: float,
        retry_after: int,
        root: Path,
        on_kill: Callable[[str, str], None] = lambda route, reason: None,
        on_reading: Callable[[Reading], None] = lambda reading: None,
    ) -> None:
        self._high, self._kill, self._retry_after, self._root = high, kill, retry_after, root
        self._on_kill, self._on_reading = on_kill, on_reading
        self.servers: dict[int, _Server] = {}
        """Started servers by pid, until they have been reaped."""
        self._killed: set[int] = set()
        self._refused = 0
        self._high_logged = -HIGH_LOG_EVERY

    def route(self, route: RouteConfig) -> RouteWatch:
        return RouteWatch(self, route.name, route.backend.max_memory)

    def admit(self) -> None:
        """A new process may start, unless the container is at ``stdio_memory_high`` (read now)."""
        reading = read_cgroup(self._root)
        if reading is not None and reading.at_least(self._high):
            self._refused += 1
            self._log_high(reading)
            raise Overloaded(MEMORY_HIGH, self._retry_after)

    def check(self) -> None:
        """Kill the servers over their route's ``max_memory``; past ``stdio_memory_kill`` (and no such
        kill in this check), the largest server."""
        reading = read_cgroup(self._root)
        if reading is not None:
            self._on_reading(reading)
        for pid in [pid for pid, s in self.servers.items() if s.process.returncode is not None]:
            del self.servers[pid]  # reaped: its pid may be another process's by now
            self._killed.discard(pid)
        killed = False
        for server, bound in [(s, s.max_memory) for s in self.servers.values() if s.max_memory is not None]:
            rss = tree_rss(server.process.pid)
            if rss is not None and rss > bound:
                killed |= self._stop(server, rss, ROUTE_MAX_MEMORY, max_memory=bound)
        if reading is None or not reading.at_least(self._high):
            return
        self._log_high(reading)
        if not killed and reading.at_least(self._kill):
            self._kill_largest(reading)

    def _kill_largest(self, reading: Reading) -> None:
        sizes = {pid: tree_rss(pid) for pid in self.servers if pid not in self._killed}
        measured = {pid: rss for pid, rss in sizes.items() if rss is not None}
        if measured:
            pid = max(measured, key=measured.__getitem__)
            detail = {"working_set_bytes": reading.working_set, "limit_bytes": reading.limit or 0}
            self._stop(self.servers[pid], measured[pid], CONTAINER_MEMORY, **detail)

    def _stop(self, server: _Server, rss: int, reason: str, **detail: int) -> bool:
        """SIGKILL the server's process group (its own: ``start_new_session``) once; the session sees
        its stdout end, and the pool closes and reaps it."""
        pid = server.process.pid
        if pid in self._killed:
            return False
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return False  # gone meanwhile
        self._killed.add(pid)
        log.warning("stdio_server_killed", route=server.route, pid=pid, rss_bytes=rss, reason=reason, **detail)
        self._on_kill(server.route, reason)
        return True

    def _log_high(self, reading: Reading) -> None:
        now = time.monotonic()
        if now - self._high_logged < HIGH_LOG_EVERY:
            return
        self._high_logged = now
        limit = reading.limit or 0
        log.warning(
            "stdio_memory_high",
            working_set_bytes=reading.working_set,
            limit_bytes=limit,
            high_bytes=int(self._high * limit),
            kill_bytes=int(self._kill * limit),
            starts_refused=self._refused,
        )
        self._refused = 0
