"""One session in a route's pool, and the key it is pooled under."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from gateway.legacy.http_sse import HttpSseSession
from gateway.legacy.stdio import StdioSession
from gateway.legacy.streamable_http import StreamableHttpSession

LegacySession = StreamableHttpSession | HttpSseSession | StdioSession

PoolKey = tuple[str, str]
"""(digest of the client's credential, the client's normalized capabilities)."""


@dataclass(eq=False, slots=True)
class PooledSession:
    key: PoolKey
    session: LegacySession
    idle_since: float = field(default_factory=time.monotonic)
    exclusive: bool = False
    """Held by one interactive call: every server request on the session belongs to it."""
    shared: int = 0
    """Plain calls (lists, completion, discover) using it at the same time."""
    doomed: bool = False
    """Close it when its last user leaves; lease it to nobody (broken, abandoned call, or a client's roots)."""
    reopening: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def in_use(self) -> bool:
        return self.exclusive or self.shared > 0

    @property
    def usable(self) -> bool:
        return not self.doomed and not self.session.broken
