"""A route while the gateway runs: its configuration, its pool of backend sessions, what the backend
is sent as credentials, and the tool schemas cached for ``Mcp-Param-*`` validation. The front door,
the call core and the replica hop all serve a request through one of these."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.backend_auth.credentials import RouteCredentials
from gateway.bounded import LruTtlCache
from gateway.config.model import RouteConfig
from gateway.legacy.pool import SessionPool
from gateway.legacy.session import JsonObj

ROUND_FENCE_ENTRIES = 1000
"""Bound on the requests a route keeps a round record of; a request past it is always fenced."""
UNFENCE_AFTER = 3
"""Fenced rounds of one question each after which a request's rounds are no longer fenced."""
TOGETHER = -1
"""A request's record once its backend asked more than one question at once."""
TOOL_SCHEMA_TTL = 60.0
"""Seconds a backend's tool list is reused for ``Mcp-Param-*`` validation."""
TOOL_SCHEMA_ENTRIES = 1000
"""Default bound on cached tool lists per route (``limits.tool_schema_cache_entries``)."""


@dataclass(eq=False)
class RoundFences:
    """Which requests of a route (method and target: ``tools/call add``) have their input rounds
    fenced by a ``ping`` (:meth:`gateway.legacy.session.Exchange.poll`).

    A fenced round holds every request the backend sent together, however its process was
    scheduled, and costs one backend round trip more (about 3 ms of a 14 ms two-round flow, bench
    ``book_table``). So a request is fenced until its backend has shown it asks one question at a
    time: :data:`UNFENCE_AFTER` fenced rounds of exactly one question. Then a round of it is what
    the bytes already received hold. A fenced round with more than one question, or an unfenced
    round found split (its next request was queued before the client's answers went upstream:
    :meth:`~gateway.legacy.session.Exchange.backend_turn`), fences it for good.

    The keys come from clients' requests, so they are bounded: past :data:`ROUND_FENCE_ENTRIES`
    a request with no record is fenced (the safe default), and records are never dropped."""

    rounds: dict[str, int] = field(default_factory=dict)
    """Per request: fenced rounds of one question so far, or :data:`TOGETHER`."""

    def fenced(self, key: str) -> bool:
        return self.rounds.get(key, 0) < UNFENCE_AFTER  # TOGETHER is below it too

    def gathered(self, key: str, questions: int) -> None:
        """A fenced round of ``key`` held ``questions`` questions."""
        if questions > 1:
            self.together(key)
            return
        seen = self.rounds.get(key)
        if seen is None and len(self.rounds) >= ROUND_FENCE_ENTRIES:
            return
        if seen != TOGETHER:
            self.rounds[key] = min((seen or 0) + 1, UNFENCE_AFTER)

    def together(self, key: str) -> None:
        """``key``'s backend asked more than one question at once: its rounds are fenced for good."""
        if key in self.rounds or len(self.rounds) < ROUND_FENCE_ENTRIES:
            self.rounds[key] = TOGETHER


@dataclass(eq=False)
class RouteRuntime:
    config: RouteConfig
    pool: SessionPool
    credentials: RouteCredentials
    """What the backend is sent as credentials (``backend.auth``), resolved per backend request."""
    tool_schemas: LruTtlCache[str, dict[str, JsonObj]] = field(
        default_factory=lambda: LruTtlCache(TOOL_SCHEMA_ENTRIES, TOOL_SCHEMA_TTL)
    )
    """Per credential digest: tool name → inputSchema, for ``Mcp-Param-*`` validation. Bounded
    (least recently used first out) because every distinct credential adds an entry."""
    round_fences: RoundFences = field(default_factory=RoundFences)
    """Which requests' input rounds are fenced (see :class:`RoundFences`)."""

    @property
    def name(self) -> str:
        return self.config.name
