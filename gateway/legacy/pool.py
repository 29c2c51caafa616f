"""Backend session pool for one route.

Sessions are keyed by (digest of the client's credential, normalized client capabilities): a
legacy session's capabilities and its backend-side identity are fixed at ``initialize``, so two
requests may share a session only when both match. An interactive call leases a session
exclusively, so every server request that arrives on it belongs to that call; plain calls share
sessions (their answers come on their own POST streams). Idle sessions are kept for reuse up to
``session_idle`` seconds and closed after (``DELETE``; a stdio server's process is stopped); the
total per route is bounded by ``max_sessions`` — past it, an idle session of another key is
evicted. For stdio it bounds processes: a closed session's process counts until it is stopped.

When no session can be had at once (every one is held and the bound is reached, or
``max_opening`` sessions are already being opened), the call waits, in arrival order, up to
``session_wait`` seconds for a session another call releases or a place to open one; only then
does it get :class:`~gateway.errors.Overloaded` (503 + ``Retry-After``). A burst larger than the
pool is served as the calls ahead of it finish instead of being refused, and a burst of cold calls
does not start a process (stdio) or a handshake per call at once. A stdio route also keeps
``prewarm`` spare processes started ahead of need: starting the interpreter is most of a cold
session's cost, so a call takes a spare and only does the handshake with its own capabilities.

Server requests that arrive while no interactive call holds a session stay pending on it (see
:mod:`gateway.legacy.session`; the session answers them itself when a list waits for them), the next
interactive call claims them, and :meth:`SessionPool.reap` has the session answer what nobody claimed
within ``holds.ttl`` (elicitation → cancel, others → error): the server is never left waiting."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import aiohttp
import structlog

from gateway.config.model import RouteConfig
from gateway.errors import Overloaded
from gateway.legacy.pool_keys import caps_key
from gateway.legacy.pool_line import Waiter, WaitingLine
from gateway.legacy.pool_open import new_session, open_session
from gateway.legacy.pooled import LegacySession, PooledSession, PoolKey
from gateway.legacy.session import JsonObj, ServerNotification
from gateway.legacy.spares import StdioSpares
from gateway.legacy.starts import RouteHealth, StartBudget
from gateway.legacy.stdio import StdioSession
from gateway.owned import TaskGroup, finish_then_close
from gateway.state.claims import credential_digest

log = structlog.get_logger("gateway.pool")

__all__ = ["LegacySession", "PoolKey", "PooledSession", "SessionPool", "credential_digest"]

HTTP_MAX_OPENING = 8
STDIO_MAX_OPENING = 1
"""Default ``max_opening``: a handshake over HTTP is cheap, starting an interpreter is not."""


class SessionPool:
    """Leases backend sessions of one route (the line of calls waiting for one:
    :mod:`gateway.legacy.pool_line`; a new session: :mod:`gateway.legacy.pool_open`)."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        route: RouteConfig,
        *,
        on_change: Callable[[str, int], None] | None = None,
        on_initialize: Callable[[str], None] | None = None,
        starts: StartBudget | None = None,
    ) -> None:
        self._http = http
        self._starts = starts
        """Every stdio process start of every route waits for a place in this budget."""
        self._tasks = TaskGroup(f"pool-{route.name}")
        """Closes of dead sessions: ended by :meth:`close` (each is bounded, and let finish)."""
        self._on_initialize = on_initialize
        self._route = route
        self._sessions: dict[PoolKey, list[PooledSession]] = {}
        self._opening = 0
        self._stopping = 0
        """Closed stdio sessions whose process is still being stopped (see :attr:`footprint`)."""
        self._detached: set[LegacySession] = set()
        """Listener sessions (subscriptions/listen): not leased, but counted in ``max_sessions``."""
        self._lock = asyncio.Lock()
        self._on_change = on_change
        self._reported: int | None = None
        self.initializations = 0
        self._line = WaitingLine()
        self._last_lease = time.monotonic()
        self._max_opening = route.backend.max_opening or (
            STDIO_MAX_OPENING if route.backend.transport == "stdio" else HTTP_MAX_OPENING
        )
        """Spares are kept while the route is in use (a lease within ``session_idle``)."""
        backend = route.backend
        prewarm = backend.prewarm if backend.transport == "stdio" else 0
        self._spares = StdioSpares(
            self._new_spare,
            prewarm,
            room=lambda: self.footprint < backend.max_sessions,
            on_ready=self._line.wake,
            max_opening=self._max_opening,
            health=RouteHealth(prewarm=prewarm),
        )

    @property
    def health(self) -> RouteHealth:
        """Whether the route can serve a call now (stdio: its processes start), for ``/readyz``."""
        return self._spares.health

    def _all(self) -> list[PooledSession]:
        return [p for sessions in self._sessions.values() for p in sessions]

    @property
    def size(self) -> int:
        return sum(map(len, self._sessions.values())) + len(self._detached) + self._opening

    @property
    def spare_count(self) -> int:
        """Started stdio processes ready to become a session (``prewarm``)."""
        return self._spares.ready

    @property
    def waiting_count(self) -> int:
        """Calls waiting in line for a session."""
        return len(self._line)

    @property
    def footprint(self) -> int:
        """What ``max_sessions`` bounds: sessions, and for stdio every process (spares, and those of
        closed sessions until they are stopped: a server that can run only once, because it binds a
        fixed port, is not started again while its last process still holds the port)."""
        return self.size + len(self._spares) + self._stopping

    @property
    def leased_count(self) -> int:
        return sum(1 for p in self._all() if p.in_use)

    @property
    def idle_count(self) -> int:
        return sum(1 for p in self._all() if not p.in_use)

    def counts_by_state(self) -> dict[str, int]:
        """Sessions by state, for the metrics: ``interactive`` (leased to one interactive call,
        running or held), ``shared`` (plain calls), ``idle``, ``listen`` (listen streams) and
        ``opening`` (in their handshake)."""
        counts = {"idle": 0, "interactive": 0, "shared": 0, "listen": len(self._detached), "opening": self._opening}
        for pooled in self._all():
            counts["interactive" if pooled.exclusive else "shared" if pooled.shared else "idle"] += 1
        return counts

    def idle_sessions(self) -> list[PooledSession]:
        return [p for p in self._all() if not p.in_use]

    def _report(self) -> None:
        """Tell ``on_change`` the route's size when it changed since it was last told (a lease or a
        release of a session that stays open changes nothing)."""
        if self._on_change is not None:
            size = self.size
            if size != self._reported:
                self._reported = size
                self._on_change(self._route.name, size)

    def key_for(self, credential: str | None, normalized_caps: JsonObj) -> PoolKey:
        return (credential_digest(credential), caps_key(normalized_caps))

    async def lease(
        self, key: PoolKey, normalized_caps: JsonObj, headers: dict[str, str], *, exclusive: bool = True
    ) -> PooledSession:
        """An open session for ``key``: exclusive for an interactive call, shared for a plain one.

        A plain call may ride on any session of its key, even one an interactive call holds: its
        answer comes on its own POST stream and it cannot be paused by server requests. An
        interactive call needs a session no other interactive call holds. Either waits in line
        (``session_wait``) when none can be had at once.
        """
        pooled = await self._claim(key, exclusive=exclusive)
        if pooled is None:
            try:
                pooled = PooledSession(key, await self._open(normalized_caps, headers))
            finally:
                self._opening -= 1
                self._line.wake()
            self._sessions.setdefault(key, []).append(pooled)
            self._mark(pooled, exclusive=exclusive)
        self._report()
        self._last_lease = time.monotonic()
        self._spares.top_up()
        return pooled

    async def _claim(self, key: PoolKey, *, exclusive: bool) -> PooledSession | None:
        """A session of ``key``, already marked as used; or None: the caller opens one (it is
        counted in ``_opening`` until then). Waits in arrival order; :class:`Overloaded` once
        ``session_wait`` has passed with the route still full."""
        if not self._line and not self._lock.locked():
            # Nobody in line: what the first pass below would do, without its lock and clock.
            pooled = self._pick(key, exclusive=exclusive)
            if pooled is not None:
                self._mark(pooled, exclusive=exclusive)
                return pooled
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._route.backend.session_wait
        waiter: Waiter | None = None
        try:
            while True:
                async with self._lock:
                    first = self._line.is_first(waiter)
                    pooled = self._pick(key, exclusive=exclusive) if first or not exclusive else None
                    if pooled is not None:
                        self._mark(pooled, exclusive=exclusive)
                        return pooled
                    if first and self._may_open():
                        self._opening += 1
                        return None
                    waiter = self._line.join(waiter)
                remaining = deadline - loop.time()
                if remaining <= 0 and self._at_bound():
                    raise Overloaded("backend_sessions_exhausted", retry_after=1)
                # past the deadline only opens (and stops) under way hold it up: their end wakes it
                await self._line.wait(waiter, remaining if remaining > 0 else None)
        finally:
            if waiter is not None:
                self._line.leave(waiter)  # whoever is next in line looks again

    def _may_open(self) -> bool:
        """A new session may be opened now: fewer than ``max_opening`` are being opened, and the
        bound leaves room (a spare process becomes the session, or an idle one is evicted)."""
        backend = self._route.backend
        if self._opening >= self._max_opening:
            return False
        if self._spares.ready or self.footprint < backend.max_sessions:
            return True
        return self._evict_one() and self.footprint < backend.max_sessions  # stdio: not until it is stopped

    def _at_bound(self) -> bool:
        """The route is full: no spare, no room under ``max_sessions``, nothing idle to evict. (A
        call that waits only for one of ``max_opening`` opens in progress is not refused: each of
        those ends within the backend's timeouts, and the call is next; nor one that waits only
        for a process being stopped, which ends within its stop's bounds.)"""
        in_use = self.footprint - self._stopping
        full = not self._spares.ready and in_use >= self._route.backend.max_sessions
        return full and not self.idle_sessions()

    @staticmethod
    def _mark(pooled: PooledSession, *, exclusive: bool) -> None:
        if exclusive:
            pooled.exclusive = True
        else:
            pooled.shared += 1

    def _pick(self, key: PoolKey, *, exclusive: bool) -> PooledSession | None:
        """Prefer the least busy session; among idle ones, the most recently used (warm connections)."""
        best: PooledSession | None = None
        best_rank = (True, 0, 0.0)
        for p in self._sessions.get(key, ()):
            if (exclusive and p.exclusive) or not p.usable:
                continue
            rank = (p.exclusive, p.shared, -p.idle_since)
            if best is None or rank < best_rank:
                best, best_rank = p, rank
        return best

    async def reopen(
        self, pooled: PooledSession, expired: LegacySession, normalized_caps: JsonObj, headers: dict[str, str]
    ) -> None:
        """Replace an expired session (backend answered 404) in place, once, whoever notices first."""
        async with pooled.reopening:
            if pooled.session is not expired:
                return  # another user of this shared session already replaced it
            pooled.session = await self._open(normalized_caps, headers)
        self._tasks.spawn(expired.close(), name="pool-close-expired")  # best-effort DELETE of a dead session

    def release(self, pooled: PooledSession, *, reusable: bool = True, exclusive: bool = True) -> None:
        if exclusive:
            pooled.exclusive = False
            pooled.session.attach(None)
        else:
            pooled.shared = max(pooled.shared - 1, 0)
        if not reusable or pooled.session.broken:
            pooled.doomed = True
        if not pooled.in_use:
            if pooled.doomed:
                self._drop(pooled)
            else:
                pooled.idle_since = time.monotonic()
        self._report()
        self._line.wake()

    def _drop(self, pooled: PooledSession) -> None:
        sessions = self._sessions.get(pooled.key, [])
        if pooled in sessions:
            sessions.remove(pooled)
            if not sessions:
                del self._sessions[pooled.key]
            self._tasks.spawn(self._close(pooled.session), name="pool-close")
            self._line.wake()

    async def _close(self, session: LegacySession) -> None:
        """Close ``session`` (bounded, never raises); the first in line looks again once it is."""
        counted = int(isinstance(session, StdioSession))
        self._stopping += counted
        try:
            await session.close()
        finally:
            self._stopping -= counted
            self._line.wake()

    async def open_detached(self, headers: dict[str, str], sink: asyncio.Queue[ServerNotification]) -> LegacySession:
        """A session no call leases (a subscription listener) whose notifications go to ``sink``.

        It counts in ``max_sessions`` like any other (for stdio it is a process too) until
        :meth:`close_detached`: past the bound an idle session is evicted, else :class:`Overloaded`.
        """
        async with self._lock:
            full = not self._spares.ready and self.footprint >= self._route.backend.max_sessions
            if full and not self._evict_one():
                raise Overloaded("backend_sessions_exhausted", retry_after=1)
            self._opening += 1
        try:
            session = await self._open({}, headers, sink=sink)
        finally:
            self._opening -= 1
            self._line.wake()
        self._detached.add(session)
        self._report()
        return session

    async def close_detached(self, session: LegacySession) -> None:
        """Close a session from :meth:`open_detached`; its place in ``max_sessions`` is free again."""
        self._detached.discard(session)
        self._report()
        self._line.wake()
        await self._close(session)

    async def _open(
        self,
        normalized_caps: JsonObj,
        headers: dict[str, str],
        *,
        sink: asyncio.Queue[ServerNotification] | None = None,
    ) -> LegacySession:
        session = new_session(
            self._http, self._route, normalized_caps, headers, spares=self._spares, starts=self._starts
        )
        session.notification_sink = sink
        session.keep_unclaimed = sink is None  # a listener's session is never leased by a call
        self.initializations += 1
        if self._on_initialize is not None:
            self._on_initialize(self._route.name)
        await open_session(session, self.health)
        return session

    def _new_spare(self) -> StdioSession:
        """An unstarted stdio session for :class:`StdioSpares` (capabilities come at lease)."""
        return StdioSession.for_route(self._route, {}, starts=self._starts)

    def prewarm(self) -> None:
        """Start the route's spare stdio processes now (also done at every reap and lease)."""
        self._spares.top_up()

    def _evict_one(self) -> bool:
        idle = self.idle_sessions()
        if not idle:
            return False
        self._drop(min(idle, key=lambda p: p.idle_since))
        return True

    def reap(self, now: float | None = None) -> int:
        """Close sessions idle for longer than ``session_idle`` (or broken); returns how many."""
        now = time.monotonic() if now is None else now
        self._expire_unclaimed(now)
        limit = self._route.backend.session_idle
        doomed = [p for p in self.idle_sessions() if now - p.idle_since > limit or not p.usable]
        for pooled in doomed:
            self._drop(pooled)
        if doomed:
            self._report()
        idle_route = now - self._last_lease > limit
        self._spares.reap(idle=idle_route)
        if not idle_route:
            self._spares.top_up()
        return len(doomed)

    def _expire_unclaimed(self, now: float) -> None:
        """Server requests no interactive call claimed within ``holds.ttl`` get the hold-expiry answer."""
        older_than = now - self._route.holds.ttl
        for pooled in self._all():
            for method in pooled.session.expire_unclaimed(older_than):
                log.info("unclaimed_server_request_expired", route=self._route.name, method=method)

    async def close(self) -> None:
        """Close every session (idle and in use) with DELETE; used at shutdown."""
        everything = [p.session for p in self._all()] + list(self._detached)
        self._sessions.clear()
        self._detached.clear()
        with contextlib.suppress(Exception):
            await asyncio.gather(
                self._spares.close(), *(session.close() for session in everything), return_exceptions=True
            )
        await finish_then_close(self._tasks)  # closes under way are bounded: cancelled, they leak
        self._report()
