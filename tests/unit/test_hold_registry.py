"""Hold registry: single use, bounds, expiry hand-off."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from gateway.errors import Overloaded
from gateway.holds.registry import Hold, HoldLimitReached, HoldRegistry, RefusedHold


def _hold(registry: HoldRegistry[Any], principal: str | None = "p", ttl: float = 60) -> Hold[Any]:
    return Hold(
        id=registry.new_id(),
        route="r",
        principal=principal,
        method="tools/call",
        target="t",
        args_digest="d",
        deadline=time.monotonic() + ttl,
        context=None,
    )


def _registry(
    expired: list[Hold[Any]] | None = None, max_holds: int = 10, per_principal: int = 10
) -> HoldRegistry[Any]:
    async def on_expire(hold: Hold[Any]) -> None:
        if expired is not None:
            expired.append(hold)

    return HoldRegistry(max_holds=max_holds, max_per_principal=per_principal, retry_after=3, on_expire=on_expire)


def _issued(registry: HoldRegistry[Any], hold: Hold[Any]) -> Hold[Any]:
    registry.add(hold)
    registry.put_back(hold, next_round=True, deadline=hold.deadline)
    return hold


def test_a_round_can_be_taken_once() -> None:
    registry = _registry()
    hold = _issued(registry, _hold(registry))
    assert registry.take(hold.id, 1) is hold
    with pytest.raises(RefusedHold) as refused:
        registry.take(hold.id, 1)
    assert refused.value.reason == "hold_busy"


def test_an_older_round_is_refused_after_the_next_is_issued() -> None:
    registry = _registry()
    hold = _issued(registry, _hold(registry))
    registry.take(hold.id, 1)
    registry.put_back(hold, next_round=True, deadline=hold.deadline)
    with pytest.raises(RefusedHold) as refused:
        registry.take(hold.id, 1)
    assert refused.value.reason == "round_replayed"
    assert registry.take(hold.id, 2) is hold


def test_a_released_claim_keeps_the_same_round_usable() -> None:
    registry = _registry()
    hold = _issued(registry, _hold(registry))
    registry.take(hold.id, 1)
    registry.release_claim(hold)
    assert registry.take(hold.id, 1) is hold


def test_unknown_hold_is_refused() -> None:
    with pytest.raises(RefusedHold) as refused:
        _registry().take("nope", 1)
    assert refused.value.reason == "hold_unknown"


def test_global_bound_refuses_new_holds_with_retry_after() -> None:
    registry = _registry(max_holds=2)
    _issued(registry, _hold(registry, "a"))
    _issued(registry, _hold(registry, "b"))
    with pytest.raises(Overloaded) as refused:
        registry.admit("c")
    assert refused.value.retry_after == 3
    assert refused.value.reason == "hold_limit"


def test_per_principal_bound_leaves_other_principals_alone() -> None:
    registry = _registry(per_principal=1)
    _issued(registry, _hold(registry, "a"))
    with pytest.raises(Overloaded):
        registry.admit("a")
    registry.admit("b")


def test_removing_a_hold_frees_its_principal_slot() -> None:
    registry = _registry(per_principal=1)
    hold = _issued(registry, _hold(registry, "a"))
    registry.remove(hold)
    registry.admit("a")
    assert len(registry) == 0


async def test_expired_holds_are_handed_to_on_expire_and_removed() -> None:
    expired: list[Hold[Any]] = []
    registry = _registry(expired)
    old = _issued(registry, _hold(registry, ttl=-1))
    fresh = _issued(registry, _hold(registry, ttl=60))
    assert registry.reap() == 1
    async with asyncio.timeout(5):
        while not expired:
            await asyncio.sleep(0)
    assert expired == [old]
    assert len(registry) == 1
    with pytest.raises(RefusedHold):
        registry.take(old.id, 1)
    assert registry.take(fresh.id, 1) is fresh


async def test_close_expires_everything() -> None:
    expired: list[Hold[Any]] = []
    registry = _registry(expired)
    holds = [_issued(registry, _hold(registry)) for _ in range(3)]
    await registry.close()
    assert sorted(h.id for h in expired) == sorted(h.id for h in holds)
    assert len(registry) == 0


async def test_a_round_past_max_rounds_ends_the_hold_like_an_expiry() -> None:
    expired: list[Hold[Any]] = []
    registry = _registry(expired)
    hold = _hold(registry)
    hold.max_rounds = 2
    _issued(registry, hold)
    registry.take(hold.id, 1)
    registry.put_back(hold, next_round=True, deadline=hold.deadline)  # round 2: still allowed
    registry.take(hold.id, 2)
    with pytest.raises(HoldLimitReached) as over:
        registry.put_back(hold, next_round=True, deadline=hold.deadline)
    assert over.value.reason == "max_rounds"
    assert len(registry) == 0
    await registry.close()
    assert expired == [hold], "the backend is answered as on expiry"


async def test_a_retry_never_rearms_the_ttl_past_the_calls_absolute_deadline() -> None:
    expired: list[Hold[Any]] = []
    registry = _registry(expired)
    hold = _hold(registry, ttl=60)
    hold.not_after = time.monotonic() + 5
    _issued(registry, hold)
    assert hold.deadline <= hold.not_after
    registry.take(hold.id, 1)
    registry.put_back(hold, next_round=True, deadline=time.monotonic() + 300)
    assert hold.deadline == hold.not_after

    registry.take(hold.id, 2)
    hold.not_after = time.monotonic()  # the call's deadline has come
    with pytest.raises(HoldLimitReached) as late:
        registry.put_back(hold, next_round=True, deadline=time.monotonic() + 300)
    assert late.value.reason == "call_deadline"
    assert len(registry) == 0
    await registry.close()
    assert expired == [hold]
