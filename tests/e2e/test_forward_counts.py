"""forwards_total counts a retry once, under the outcome it ended with (issue 11 item 4): a retry
whose forward to a dead owner failed and that was then replayed is ``replayed`` only, not also
``owner_unreachable`` (it was both before)."""

from __future__ import annotations

import aiohttp
from fake_backend import FakeBackend
from harness import BareClient, held_by_a_gone_replica, route, running_replicas

from gateway import keys
from gateway.observability.metrics.registry import Metrics

Backend = tuple[FakeBackend, str]
REPLAY = {"holds": {"on_lost": "replay"}}


async def test_a_replayed_retry_counts_once_as_replayed(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    """The forward to the dead owner fails (owner_unreachable), then the call is replayed: one
    outcome, ``replayed``. Before the fix both were counted."""
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url, **REPLAY)]) as (a, b):
        state, answers = await held_by_a_gone_replica(http, a)
        done = await BareClient(http, b.url()).retry("ask_city", state, answers)
        assert done.text == "city=Oslo"
        metrics: Metrics = b.app[keys.METRICS]
        assert metrics.forwards.labels("demo", "replayed")._value.get() == 1
        assert metrics.forwards.labels("demo", "owner_unreachable")._value.get() == 0


async def test_an_unreachable_owner_without_replay_counts_once(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        state, answers = await held_by_a_gone_replica(http, a)
        lost = await BareClient(http, b.url()).retry("ask_city", state, answers)
        assert lost.error["data"]["cause"] == "owner_unreachable"
        metrics: Metrics = b.app[keys.METRICS]
        assert metrics.forwards.labels("demo", "owner_unreachable")._value.get() == 1
        assert metrics.forwards.labels("demo", "replayed")._value.get() == 0
        assert metrics.forwards.labels("demo", "forwarded")._value.get() == 0
