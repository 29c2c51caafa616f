"""Two bounded memories, so nothing a peer sends can grow the gateway without limit.

* :class:`LruTtlCache` — a cache that may forget: entries expire after a TTL, and past
  ``max_entries`` the least recently used one is evicted. Forgetting only costs a recomputation
  (the tool-schema cache behind ``Mcp-Param-*`` validation).
* :class:`OnceMemory` — a memory that must not forget: it answers "seen before?" for single-use
  values (replay tokens, forwarding-hop nonces) until each value's own expiry. Evicting a live
  entry would let that value be used twice, so when every slot holds a live entry it refuses new
  values instead (:class:`MemoryFull`): the caller fails closed.

Both are synchronous and single-threaded (one event loop); checking and recording happen in one
call with no ``await`` in between, so two concurrent requests cannot both see "first use".
"""

from __future__ import annotations

import heapq
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruTtlCache(Generic[K, V]):
    """At most ``max_entries`` values, each kept at most ``ttl`` seconds (monotonic clock)."""

    def __init__(self, max_entries: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.ttl = ttl
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: K, value: V) -> None:
        self._entries[key] = (self._clock() + self.ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


class MemoryFull(Exception):
    """Every slot of a :class:`OnceMemory` holds a value that has not expired yet."""


class OnceMemory(Generic[K]):
    """Remembers single-use values until their expiry (unix seconds); bounded by ``max_entries``."""

    def __init__(self, max_entries: int, clock: Callable[[], float] = time.time) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._clock = clock
        self._until: dict[K, float] = {}
        self._expiries: list[tuple[float, int, K]] = []  # min-heap; the int breaks ties without comparing keys
        self._sequence = 0

    def __len__(self) -> int:
        return len(self._until)

    def _purge(self, now: float) -> None:
        while self._expiries and self._expiries[0][0] <= now:
            until, _, key = heapq.heappop(self._expiries)
            if self._until.get(key) == until:
                del self._until[key]

    def first_use(self, key: K, until: float, now: float | None = None) -> bool:
        """True exactly once per ``key`` while it is remembered; records it until ``until``.

        Raises :class:`MemoryFull` (nothing recorded) when no slot is free. ``now`` overrides the
        clock (the caller judged the value's validity at that instant).
        """
        now = self._clock() if now is None else now
        self._purge(now)
        if key in self._until:
            return False
        if len(self._until) >= self.max_entries:
            raise MemoryFull
        if until <= now:
            return True  # already past its expiry: nothing can use it again, nothing to remember
        self._until[key] = until
        self._sequence += 1
        heapq.heappush(self._expiries, (until, self._sequence, key))
        return True

    def used(self, key: K) -> bool:
        """Whether ``key`` is remembered (used, and not yet expired or forgotten)."""
        until = self._until.get(key)
        return until is not None and until > self._clock()

    def forget(self, key: K) -> None:
        """Undo a :meth:`first_use` whose use provably never took effect."""
        self._until.pop(key, None)
