"""Backend session pool for one route.

Sessions are keyed by (digest of the client's credential, normalized client capabilities): a
legacy session's capabilities and its backend-side identity are fixed at ``initialize``, so two
requests may share a session only when both match. Every call leases a session exclusively, so
anything the backend sends on it belongs to that call. Idle sessions are kept for reuse up to
``session_idle`` seconds and closed (``DELETE``) after; the total per route is bounded by
``max_sessions`` — past it, an idle session of another key is evicted, and if none is idle the
caller gets :class:`~gateway.errors.Overloaded`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
import structlog

from gateway.config.model import RouteConfig
from gateway.errors import BackendUnavailable, Overloaded
from gateway.legacy.http_sse import HttpSseSession
from gateway.legacy.session import JsonObj, ServerNotification, SessionExpired
from gateway.legacy.streamable_http import StreamableHttpSession
from gateway.translate import capabilities as caps

log = structlog.get_logger("gateway.pool")

PoolKey = tuple[str, str]
LegacySession = StreamableHttpSession | HttpSseSession


def credential_digest(credential: str | None) -> str:
    if not credential:
        return "-"
    return hashlib.sha256(credential.encode()).hexdigest()[:32]


@dataclass(eq=False)
class PooledSession:
    key: PoolKey
    session: LegacySession
    idle_since: float = field(default_factory=time.monotonic)


class SessionPool:
    """Leases backend sessions of one route."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        route: RouteConfig,
        *,
        on_change: Callable[[str, int], None] | None = None,
    ) -> None:
        self._http = http
        self._route = route
        self._idle: dict[PoolKey, list[PooledSession]] = {}
        self._leased: set[PooledSession] = set()
        self._opening = 0
        self._lock = asyncio.Lock()
        self._on_change = on_change
        self.initializations = 0

    @property
    def size(self) -> int:
        return len(self._leased) + sum(len(v) for v in self._idle.values()) + self._opening

    @property
    def leased_count(self) -> int:
        return len(self._leased)

    @property
    def idle_count(self) -> int:
        return sum(len(v) for v in self._idle.values())

    def idle_sessions(self) -> list[PooledSession]:
        return [p for sessions in self._idle.values() for p in sessions]

    def _report(self) -> None:
        if self._on_change is not None:
            self._on_change(self._route.name, self.size)

    def key_for(self, credential: str | None, normalized_caps: JsonObj) -> PoolKey:
        return (credential_digest(credential), caps.cache_key(normalized_caps))

    async def lease(self, key: PoolKey, normalized_caps: JsonObj, headers: dict[str, str]) -> PooledSession:
        """An exclusive, open session for ``key`` (reused when one is idle)."""
        async with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                pooled = idle.pop()
                if not pooled.session.broken:
                    self._leased.add(pooled)
                    return pooled
                asyncio.create_task(pooled.session.close())  # noqa: RUF006 - best-effort DELETE
            if self.size >= self._route.backend.max_sessions and not self._evict_one():
                raise Overloaded("backend_sessions_exhausted", retry_after=1)
            self._opening += 1
        try:
            pooled = PooledSession(key, await self._open(normalized_caps, headers))
        finally:
            self._opening -= 1
        self._leased.add(pooled)
        self._report()
        return pooled

    async def reopen(self, pooled: PooledSession, normalized_caps: JsonObj, headers: dict[str, str]) -> None:
        """Replace an expired session (backend answered 404) in place, keeping the lease."""
        old = pooled.session
        pooled.session = await self._open(normalized_caps, headers)
        asyncio.create_task(old.close())  # noqa: RUF006 - best-effort DELETE of a dead session

    def release(self, pooled: PooledSession, *, reusable: bool = True) -> None:
        self._leased.discard(pooled)
        pooled.session.attach(None)
        if reusable and not pooled.session.broken:
            pooled.idle_since = time.monotonic()
            self._idle.setdefault(pooled.key, []).append(pooled)
        else:
            asyncio.create_task(pooled.session.close())  # noqa: RUF006 - close is bounded and never raises
        self._report()

    async def open_detached(self, headers: dict[str, str], sink: asyncio.Queue[ServerNotification]) -> LegacySession:
        """A session outside the pool (a subscription listener) whose notifications go to ``sink``."""
        return await self._open({}, headers, sink=sink)

    async def _open(
        self,
        normalized_caps: JsonObj,
        headers: dict[str, str],
        *,
        sink: asyncio.Queue[ServerNotification] | None = None,
    ) -> LegacySession:
        backend = self._route.backend
        offer = backend.protocol_version
        factory: type[StreamableHttpSession] | type[HttpSseSession]
        factory = HttpSseSession if backend.transport == "sse" else StreamableHttpSession
        session = factory(
            self._http,
            backend.url,
            capabilities=caps.to_legacy(normalized_caps, offer or "2025-11-25"),
            headers=headers,
            timeout=backend.timeout,
            connect_timeout=backend.connect_timeout,
            offer_version=offer,
        )
        session.notification_sink = sink
        self.initializations += 1
        try:
            await session.open()
        except SessionExpired as exc:
            raise BackendUnavailable("initialize_failed", "backend refused the new session") from exc
        except BaseException:
            await session.close()
            raise
        return session

    def _evict_one(self) -> bool:
        oldest: PooledSession | None = None
        for sessions in self._idle.values():
            for pooled in sessions:
                if oldest is None or pooled.idle_since < oldest.idle_since:
                    oldest = pooled
        if oldest is None:
            return False
        self._idle[oldest.key].remove(oldest)
        asyncio.create_task(oldest.session.close())  # noqa: RUF006
        return True

    def reap(self, now: float | None = None) -> int:
        """Close sessions idle for longer than ``session_idle``; returns how many."""
        now = time.monotonic() if now is None else now
        limit = self._route.backend.session_idle
        closed = 0
        for key, sessions in list(self._idle.items()):
            keep = []
            for pooled in sessions:
                if now - pooled.idle_since > limit or pooled.session.broken:
                    asyncio.create_task(pooled.session.close())  # noqa: RUF006
                    closed += 1
                else:
                    keep.append(pooled)
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        if closed:
            self._report()
        return closed

    async def close(self) -> None:
        """Close every session (idle and leased) with DELETE; used at shutdown."""
        everything = [p for s in self._idle.values() for p in s] + list(self._leased)
        self._idle.clear()
        self._leased.clear()
        with contextlib.suppress(Exception):
            await asyncio.gather(*(p.session.close() for p in everything), return_exceptions=True)
        self._report()
