"""The bounded memories: a cache that may forget, and a single-use memory that must not."""

from __future__ import annotations

import pytest

from gateway.bounded import LruTtlCache, MemoryFull, OnceMemory


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_cache_keeps_at_most_max_entries_across_thousands_of_keys() -> None:
    cache: LruTtlCache[str, bytes] = LruTtlCache(max_entries=100, ttl=60)
    for n in range(5000):
        cache.put(f"credential-{n}", b"x" * 5000)
        assert len(cache) <= 100
    assert len(cache) == 100
    assert cache.get("credential-4999") is not None
    assert cache.get("credential-0") is None


def test_the_least_recently_used_entry_leaves_first() -> None:
    cache: LruTtlCache[str, int] = LruTtlCache(max_entries=2, ttl=60)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)


def test_an_entry_expires_after_its_ttl() -> None:
    clock = Clock()
    cache: LruTtlCache[str, int] = LruTtlCache(max_entries=10, ttl=60, clock=clock)
    cache.put("a", 1)
    clock.now += 59.9
    assert cache.get("a") == 1
    clock.now += 0.1
    assert cache.get("a") is None
    assert len(cache) == 0


def test_once_memory_says_first_use_once_until_expiry() -> None:
    clock = Clock()
    memory: OnceMemory[str] = OnceMemory(max_entries=10, clock=clock)
    assert memory.first_use("t", until=1010)
    assert not memory.first_use("t", until=1010)
    clock.now = 1010
    assert memory.first_use("t", until=1020), "forgotten once nothing can use it any more"


def test_once_memory_refuses_when_full_of_live_entries_and_never_evicts_them() -> None:
    clock = Clock()
    memory: OnceMemory[str] = OnceMemory(max_entries=2, clock=clock)
    assert memory.first_use("a", until=1100)
    assert memory.first_use("b", until=1005)
    with pytest.raises(MemoryFull):
        memory.first_use("c", until=1100)
    assert not memory.first_use("a", until=1100), "a live entry was not evicted to make room"
    clock.now = 1005
    assert memory.first_use("c", until=1100), "an expired entry makes room"
    assert len(memory) == 2


def test_once_memory_forget_allows_a_use_that_never_took_effect() -> None:
    memory: OnceMemory[str] = OnceMemory(max_entries=2)
    assert memory.first_use("a", until=4e9)
    memory.forget("a")
    assert memory.first_use("a", until=4e9)
